"""Every diagnosis check, in one list: the runner, the gather step, the docs and the tests enumerate it.

Adding a check is its module and one line here; `select` turns the `--check`/`--skip` choice (or
the config's `diagnose.checks`/`diagnose.skip`) into the checks that run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.diagnose.checks.client import ConnectionSetup, OutsideEngine
from lanewatch.collector.diagnose.checks.decode import DecodeBound, Interference, SpecDecodeAcceptance
from lanewatch.collector.diagnose.checks.lanes import ErrorsShedding, FlatLatency, LaneMisrouting
from lanewatch.collector.diagnose.checks.prefill import PrefillPrefixReuse
from lanewatch.collector.diagnose.checks.queue import QueueCompute, QueueKvMemory, QueueUnsplit
from lanewatch.collector.diagnose.checks.server_wait import ServerWaitUnsplit
from lanewatch.collector.diagnose.evidence import SERVER_KEYS, flat_keys
from lanewatch.collector.diagnose.model import Check

__all__ = ["CHECKS", "UnknownCheckError", "check_by_id", "planned", "select", "server_keys"]

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


class UnknownCheckError(ConfigError):
    """A check id that no registered check has; the message names it and where it was given."""


def check_by_id(check_id: str) -> Check:
    """The registered check with this id; KeyError names it when there is none."""
    for check in CHECKS:
        if check.id == check_id:
            return check
    raise KeyError(check_id)


def select(
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    *,
    only_from: str = "--check",
    skip_from: str = "--skip",
) -> tuple[Check, ...]:
    """The registered checks named in `only` (all when empty) less those in `skip`, in registry order;
    UnknownCheckError names an id no check has and the option (`only_from`, `skip_from`) it came in."""
    known = [c.id for c in CHECKS]
    for given, where in ((only, only_from), (skip, skip_from)):
        unknown = [i for i in given if i not in known]
        if unknown:
            raise UnknownCheckError(
                f"{where}: no check {', '.join(map(repr, unknown))} (the checks: {', '.join(known)})"
            )
    return tuple(c for c in CHECKS if (not only or c.id in only) and c.id not in skip)


def planned(checks: Iterable[Check]) -> tuple[Check, ...]:
    """The checks to run for `checks`: they and, before them, every check that may explain one of them."""
    out: dict[str, Check] = {}

    def add(check: Check) -> None:
        for explainer in check.explained_by:
            if explainer not in out:
                add(check_by_id(explainer))
        out.setdefault(check.id, check)

    for check in checks:
        add(check)
    return tuple(out.values())


def server_keys(checks: Iterable[Check]) -> frozenset[str]:
    """The vLLM series (ServerSeries fields) the checks need or read: all the gather step asks for."""
    keys = {k for c in planned(checks) for k in (*flat_keys(c.needs), *c.reads)}
    return frozenset(k for k in SERVER_KEYS if k in keys)
