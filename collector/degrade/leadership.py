"""Which controller of a pair leads: a lease in the shared store, taken, renewed and lost.

After Kubernetes' leader election (controller-runtime): a standby tries for the lease every
`retry_s`; the leader renews it as often, and stops leading when it could not renew for
`renew_deadline_s`, well before the lease (`lease_s`) runs out for the standby. Losing the
lead ends the process, as controller-runtime's managers do: whatever it had under way dies
with it, and its supervisor starts it again as a standby. The store fences every write by the
term won, and the routers refuse an older revision, so a leader that stalled past its lease
and wakes up can change nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from lanewatch.collector.common.errors import UpstreamError

from .shared_store import Lease, SharedStore

__all__ = ["Leadership", "LeaseTimes", "LostLead", "must_step_down"]

log = logging.getLogger("lanewatch.degrade")


class LostLead(UpstreamError, RuntimeError):
    """The leader could not renew its lease in time, or found it taken."""


@dataclass(frozen=True)
class LeaseTimes:
    """The lease's timing: how long it lasts, how long the leader tries to renew, how often."""

    lease_s: float = 6.0
    renew_deadline_s: float = 4.0
    retry_s: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_s < self.renew_deadline_s < self.lease_s:
            raise ValueError(
                "lease times must satisfy 0 < retry_s < renew_deadline_s < lease_s "
                f"(got {self.retry_s}, {self.renew_deadline_s}, {self.lease_s})"
            )


def must_step_down(renewed_at: float, now: float, times: LeaseTimes) -> bool:
    """The leader's last renewal (sent at `renewed_at`, its own monotonic clock) is too old to lead on."""
    return now - renewed_at >= times.renew_deadline_s


class Leadership:
    """Campaigns for the lease and keeps it; the store's `term` says whether this process leads."""

    def __init__(
        self,
        store: SharedStore,
        url: str,
        times: LeaseTimes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.url = url
        self.times = times
        self._clock = clock
        self.seen: Lease | None = None  # the lease as last read, whoever holds it

    @property
    def leading(self) -> bool:
        """This process holds the lease (as of its last renewal)."""
        return self.store.term is not None

    async def campaign(self, stop: asyncio.Event) -> Lease | None:
        """Wait until this process takes the lease (the lease), or `stop` is set (None)."""
        while not stop.is_set():
            try:
                lease = self.store.take_lease(self.url, self.times.lease_s)
                if lease is not None:
                    self.seen = lease
                    log.info("took the lead: term %d", lease.term)
                    return lease
                self.seen = self.store.lease()
            except Exception as exc:  # the store is down: keep trying, nobody can lead meanwhile
                log.warning("cannot reach the shared store to campaign: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.times.retry_s)
        return None

    async def keep(self, stop: asyncio.Event) -> None:
        """Renew the lease until `stop` is set (then resign it); LostLead when it cannot."""
        renewed_at = self._clock()
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.times.retry_s)
                break
            except TimeoutError:
                pass
            sent = self._clock()
            try:
                lease = self.store.take_lease(self.url, self.times.lease_s)
            except Exception as exc:
                log.warning("could not renew the lease: %s", exc)
                if must_step_down(renewed_at, self._clock(), self.times):
                    raise LostLead(
                        f"could not renew the lease for {self.times.renew_deadline_s:g} s"
                    ) from exc
                continue
            if lease is None:
                self.seen = self._peek()
                holder = self.seen.holder if self.seen else "nobody"
                raise LostLead(f"the lease is held by {holder}")
            self.seen = lease
            renewed_at = sent
        try:
            self.store.resign()
        except Exception as exc:  # the lease runs out by itself
            log.warning("could not resign the lease: %s", exc)

    def _peek(self) -> Lease | None:
        try:
            return self.store.lease()
        except Exception:
            return None
