"""The lease's timing rules and how `degrade status` tells who leads."""

from __future__ import annotations

import pytest

from lanewatch.collector.degrade.leadership import LeaseTimes, must_step_down
from lanewatch.collector.degrade.shared_store import Lease
from lanewatch.collector.degrade.status import leader_line


def test_the_leader_steps_down_before_its_lease_runs_out_for_the_standby() -> None:
    times = LeaseTimes(lease_s=6.0, renew_deadline_s=4.0, retry_s=1.0)
    assert not must_step_down(renewed_at=100.0, now=103.9, times=times)
    assert must_step_down(renewed_at=100.0, now=104.0, times=times)


@pytest.mark.parametrize(("lease_s", "deadline_s", "retry_s"), [(6, 6, 1), (6, 4, 4), (6, 7, 1), (6, 4, 0)])
def test_lease_times_out_of_order_are_refused(lease_s: float, deadline_s: float, retry_s: float) -> None:
    with pytest.raises(ValueError, match="retry_s < renew_deadline_s < lease_s"):
        LeaseTimes(lease_s, deadline_s, retry_s)


def test_status_names_the_leader_or_says_none_leads() -> None:
    assert leader_line(None) == "leader: none (no controller has led yet)"
    live = Lease("ctl-a", "http://ctl-a:9097", 3, 1_800_000_000.0, 1_800_000_100.0, 1_800_000_096.0)
    assert leader_line(live) == (
        "leader: ctl-a (http://ctl-a:9097), term 3, since 2027-01-15T08:00:00Z, "
        "lease renewed to 4.0 s from now"
    )
    lapsed = Lease("ctl-a", "http://ctl-a:9097", 3, 1_800_000_000.0, 1_800_000_100.0, 1_800_000_112.5)
    assert leader_line(lapsed) == "leader: NONE: ctl-a's lease (term 3) expired 12.5 s ago"
    assert live.live and not lapsed.live
