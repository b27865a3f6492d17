"""Every diagnosis check, in one list: the runner, the docs and the tests enumerate it."""

from __future__ import annotations

from lanewatch.collector.diagnose.checks.client import ConnectionSetup, OutsideEngine
from lanewatch.collector.diagnose.checks.decode import DecodeBound, Interference, SpecDecodeAcceptance
from lanewatch.collector.diagnose.checks.lanes import ErrorsShedding, FlatLatency, LaneMisrouting
from lanewatch.collector.diagnose.checks.prefill import PrefillPrefixReuse
from lanewatch.collector.diagnose.checks.queue import QueueCompute, QueueKvMemory, QueueUnsplit
from lanewatch.collector.diagnose.checks.server_wait import ServerWaitUnsplit
from lanewatch.collector.diagnose.model import Check

__all__ = ["CHECKS", "check_by_id"]

CHECKS: tuple[Check, ...] = (
    QueueKvMemory(),
    QueueCompute(),
    QueueUnsplit(),
    ServerWaitUnsplit(),
    PrefillPrefixReuse(),
    Interference(),
    DecodeBound(),
    SpecDecodeAcceptance(),
    ConnectionSetup(),
    OutsideEngine(),
    FlatLatency(),
    LaneMisrouting(),
    ErrorsShedding(),
)


def check_by_id(check_id: str) -> Check:
    """The registered check with this id; KeyError names it when there is none."""
    for check in CHECKS:
        if check.id == check_id:
            return check
    raise KeyError(check_id)
