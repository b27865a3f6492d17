"""The nginx adapter against a real nginx: a shifted request obeys the serving lane's shed, and an
include whose check does not pass, for any reason, never stays on disk.

Shares are counted at the two test upstreams behind the shipped config.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.collector.degrade.adapters import Adapter, AdapterError, NginxSettings
from lanewatch.collector.degrade.adapters.files import run_command
from lanewatch.collector.degrade_state.wire import LaneDegrade

from .traffic import BATCH, SHIFTED, router_setup, send, share_at_fast

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# The default policy with both lanes alerting: slow shifts to fast, and fast sheds batch.
BOTH_ALERTING = {
    "slow": LaneDegrade(shift_to="fast", shift_percent=100),
    "fast": LaneDegrade(shed_classes=("batch",)),
}


async def test_a_request_shifted_to_a_lane_obeys_that_lanes_shed(tmp_path: Path) -> None:
    async with router_setup("nginx", tmp_path) as (ups, router, adapter, s):
        await adapter.apply(BOTH_ALERTING, 1)
        before = {lane: len(up.requests) for lane, up in ups.items()}
        statuses = [await send(s, router.url, "slow", BATCH) for _ in range(10)]
        assert statuses == [429] * 10  # the gateway's decide sheds each of them
        assert {lane: len(up.requests) - before[lane] for lane, up in ups.items()} == {"fast": 0, "slow": 0}
        assert await share_at_fast(s, router, ups, 10) == 1.0  # the other classes still shift

        # Half shifted: the half on fast is shed, the half kept on slow (which sheds nothing) served.
        half = {**BOTH_ALERTING, "slow": LaneDegrade(shift_to="fast", shift_percent=50)}
        await adapter.apply(half, 2)
        before = {lane: len(up.requests) for lane, up in ups.items()}
        statuses = [await send(s, router.url, "slow", BATCH) for _ in range(20)]
        served = {lane: len(up.requests) - before[lane] for lane, up in ups.items()}
        assert served["fast"] == 0
        assert served["slow"] == statuses.count(200) and statuses.count(429) + statuses.count(200) == 20
        assert 0 < statuses.count(429) < 20  # a 2**-19 chance of failing by split_clients' hash


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(["sh", "-c", "sleep 30"], id="timed-out"),
        pytest.param(["/nonexistent/lanewatch-nginx"], id="cannot-start"),
    ],
)
async def test_an_include_whose_check_does_not_finish_is_put_back(tmp_path: Path, check: list[str]) -> None:
    async with router_setup("nginx", tmp_path) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        settings = router.settings
        assert isinstance(settings, NginxSettings)
        good = settings.include_file.read_text()
        stuck = settings.model_copy(update={"check_command": check, "command_timeout_s": 0.5}).build()
        with pytest.raises(AdapterError, match="previous include is back in place"):
            await stuck.apply({}, 2)
        assert settings.include_file.read_text() == good
        assert await _held(stuck) == SHIFTED  # what nginx holds: it was not reloaded
        # Someone else's reload loads what is on disk: still the checked include, the shift.
        code, output = await run_command(settings.reload_command, 30)
        assert code == 0, output
        assert await share_at_fast(s, router, ups, 10) == 1.0


async def _held(adapter: Adapter) -> dict[str, LaneDegrade]:
    view = await adapter.read_back()
    assert view is not None
    return view.lanes
