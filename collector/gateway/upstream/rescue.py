"""The rescue race: a streamed request whose first token is late is sent again to a faster lane, and
the attempt whose first content token comes first answers the client.

Each attempt is `forward` in a task of its own, writing to a `_Held` stand-in for the client's
connection: it keeps the attempt's response head and the bytes before its first content token
(vLLM sends a streamed answer's head, and its role chunk, before the prefill) until the race is
decided. The first attempt with a first content token is released: its head (naming the lane that
serves it), what it held, and the rest of its stream go to the client, which sees one status, one
set of headers and one SSE stream. At the deadline the policy (rescue_policy.py) decides; a rescue
it declines releases the first attempt at once, so no request is held past its deadline.

The loser is cancelled: its upstream connection is closed, which makes vLLM abort the request.
A late attempt that lost waits, unseen, until its own first token or its SLO passed (then it has
missed), and no longer: the guard and the rules judge its lane by what the lane really did, so a
rescue hides no breach and invents none. A rescue that lost is cancelled at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Protocol

from lanewatch.collector.degrade_state.state import DegradeState
from lanewatch.collector.progress.inflight import InFlight

from ..front.connection import FrontConn, Response
from .exchange import Exchange, RescueTrace
from .forward import Flight, Forwarding, UpstreamCounts, UpstreamRequest, begin, forward
from .rescue_policy import Decline, Plan, RescuePolicy

__all__ = ["Race", "Rescuing"]

log = logging.getLogger("lanewatch.gateway")

MAX_HELD_BYTES = 64 * 1024  # bytes before a first content token no answer needs: past it, released


class RaceCounts(UpstreamCounts, Protocol):
    """The counters the race adds to besides forwarding's."""

    @property
    def rescues(self) -> Counter[tuple[str, str, str]]: ...  # lane, target, outcome


class Rescuing(Forwarding, Protocol):
    """What the race reads of the gateway besides forwarding's: the policy, the degrade state, and the
    in-flight table the guard's progress reports come from."""

    @property
    def rescue(self) -> RescuePolicy: ...
    @property
    def degrade(self) -> DegradeState: ...
    @property
    def in_flight(self) -> InFlight: ...
    @property
    def stats(self) -> RaceCounts: ...


class _Attempt:
    """One attempt of the race: its exchange, its task, and what it holds for the client."""

    __slots__ = (
        "end_at",
        "ex",
        "head",
        "held",
        "held_bytes",
        "noted",
        "released",
        "rescue",
        "rid",
        "sent_at",
        "tail",
        "task",
    )

    def __init__(self, ex: Exchange, rescue: bool, sent_at: float) -> None:
        self.ex, self.rescue, self.sent_at = ex, rescue, sent_at
        self.task: asyncio.Task[Response | None] | None = None
        self.head: tuple[int, str, list[tuple[str, str]], int | None] | None = None
        self.held: list[bytes] = []
        self.held_bytes = 0
        self.tail: bytes | None = None  # the attempt finished its body while held
        self.released = False  # its bytes go to the client
        self.noted = False  # the race has heard of its first token
        self.end_at: float | None = None
        self.rid: int | None = None  # its in-flight entry

    @property
    def first_at(self) -> float | None:
        """When its first content token came (perf_counter), None until then."""
        tap = self.ex.tap
        return None if tap is None else tap.first_content_at

    @property
    def alive(self) -> bool:
        """Its task still runs."""
        return self.task is not None and not self.task.done()


class _Held:
    """The client's connection as one attempt writes to it: kept back until the race is decided."""

    __slots__ = ("a", "front", "race")

    def __init__(self, race: Race, a: _Attempt, front: FrontConn) -> None:
        self.race, self.a, self.front = race, a, front

    @property
    def closed(self) -> bool:
        return self.front.closed

    @property
    def paused(self) -> bool:
        return self.a.released and self.front.paused

    def start(self, status: int, reason: str, headers: list[tuple[str, str]], length: int | None) -> None:
        if self.a.released:
            self.front.start(status, reason, headers, length)
        else:
            self.a.head = (status, reason, headers, length)

    def send(self, payload: bytes) -> None:
        a = self.a
        if a.released:
            self.front.send(payload)
            return
        if self.race.winner is None:  # a loser's bytes go nowhere; it runs on only to its first token
            a.held.append(payload)
            a.held_bytes += len(payload)
        if not a.noted and (a.first_at is not None or a.held_bytes > MAX_HELD_BYTES):
            a.noted = True
            self.race.first_content(a)

    def finish(self, tail: bytes = b"") -> None:
        if self.a.released:
            self.front.finish(tail)
        else:
            self.a.tail = tail

    async def drain(self) -> None:
        if self.a.released:
            await self.front.drain()


@dataclass(slots=True)
class RescueRequest:
    """The second attempt, as the request path makes it for a target lane: its exchange and request."""

    ex: Exchange
    request: UpstreamRequest


class Race:
    """One request's attempts: the first on its lane, and a rescue on a faster lane if it is late."""

    def __init__(
        self,
        gw: Rescuing,
        front: FrontConn,
        plan: Plan,
        rescue_request: Callable[[str], RescueRequest],
    ) -> None:
        self.gw, self.front, self.plan, self._rescue_request = gw, front, plan, rescue_request
        self.attempts: list[_Attempt] = []
        self.winner: _Attempt | None = None
        self._answer: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
        self._timers: list[asyncio.TimerHandle] = []
        self._deadline_timer: asyncio.TimerHandle | None = None

    async def run(self, ex: Exchange, flight: Flight) -> Response | None:
        """Race the request to its answer; the client's answer (a response, or None once streamed)."""
        first = self._start(ex, flight, rescue=False, sent_at=ex.t0)
        self._deadline_timer = self._at(ex.t0 + self.plan.deadline_s, self._deadline)
        try:
            return await asyncio.shield(self._answer)
        except asyncio.CancelledError:  # the client went away: no attempt has anyone to answer
            self.cancel()
            raise
        finally:
            winner = self.winner or first
            winner.ex.end = perf_counter()

    @property
    def exchange(self) -> Exchange:
        """The exchange the request's record is made of: the winner's, else the first attempt's."""
        return (self.winner or self.attempts[0]).ex

    def late_wait_s(self) -> float | None:
        """A won rescue's late attempt: its wait to its own first token, or to its cancel without one;
        None when no rescue won, or the late attempt failed on its own."""
        if self.winner is None or not self.winner.rescue:
            return None
        late = self.attempts[0]
        if late.first_at is not None:
            return late.first_at - late.ex.t0
        if late.task is not None and late.task.done() and late.task.cancelled() and late.end_at is not None:
            return late.end_at - late.ex.t0
        return None

    @property
    def settled(self) -> bool:
        """Every attempt has ended: the record can be made."""
        return not any(a.alive for a in self.attempts)

    async def settle(self) -> None:
        """Wait for the attempts still running (a late loser, until its first token or its cutoff)."""
        for a in self.attempts:
            if a.task is not None:
                with contextlib.suppress(BaseException):
                    await a.task
        for timer in self._timers:
            timer.cancel()

    def cancel(self) -> None:
        """Stop every attempt (the client went away, or the gateway stops)."""
        for a in self.attempts:
            if a.alive and a.task is not None:
                a.task.cancel()

    # ---------------------------------------------------------------- the race's events
    def first_content(self, a: _Attempt) -> None:
        """`a` has its first content token (or held too much): the first one wins; a loser stops."""
        if (first := a.first_at) is not None:  # each attempt's TTFT, as it comes: the deadlines read it
            self.gw.rescue.first_token(a.ex.decision.served_lane, first - a.sent_at, first)
        if self.winner is None:
            self._win(a)
            return
        if a is not self.winner and a.alive and a.task is not None:
            a.task.cancel()  # a late loser's first token: its lane is judged, its work is waste

    def _win(self, a: _Attempt) -> None:
        self.winner = a
        if self._deadline_timer is not None:  # decided: a request answered in time holds no timer
            self._deadline_timer.cancel()
        self._release(a)
        for other in self.attempts:
            if other is a or not other.alive:
                continue
            if other.rescue:
                self._count("lost")  # the late lane answered first after all
                assert other.task is not None
                other.task.cancel()
            else:  # the late attempt lost: it waits, unseen, for its first token or its cutoff
                self._count("won")
                assert other.task is not None
                self._at(other.ex.t0 + self.plan.cutoff_s, other.task.cancel)

    def _deadline(self) -> None:
        first = self.attempts[0]
        if self.winner is not None or not first.alive:
            return
        now = perf_counter()
        declined: Decline | None = self.gw.rescue.decide(self.plan, self.gw.degrade, now)
        if declined is not None:
            self._count(declined)
            self._win(first)  # nothing to race: the client gets the first attempt from now on
            return
        second = self._rescue_request(self.plan.target)
        first.ex.rescue = second.ex.rescue = RescueTrace(self.plan.lane, now)
        flight = begin(self.gw, second.ex, second.request)
        self._start(second.ex, flight, rescue=True, sent_at=now)

    def _ended(self, a: _Attempt, task: asyncio.Task[Response | None]) -> None:
        """An attempt's task ended: the answer, a dropped attempt, or the last one standing."""
        a.end_at = perf_counter()
        if a.rid is not None:
            self.gw.in_flight.end(a.rid, a.end_at)
        result: Response | None = None
        if not task.cancelled():
            exc = task.exception()
            if exc is not None:
                log.error(
                    "a %s attempt to lane %s failed",
                    "rescue" if a.rescue else "first",
                    a.ex.decision.served_lane,
                    exc_info=exc,
                )
            else:
                result = task.result()
        if self._answer.done():
            return
        if a is self.winner:
            self._answer.set_result(result)
        elif self.winner is None:
            if any(o.alive for o in self.attempts):  # the other may still answer: this one is dropped
                if a.rescue:
                    self._count("failed")
                return
            self._win(a)  # the last one standing answers, error or not
            self._answer.set_result(result)

    # ---------------------------------------------------------------- helpers
    def _start(self, ex: Exchange, flight: Flight, rescue: bool, sent_at: float) -> _Attempt:
        a = _Attempt(ex, rescue, sent_at)
        self.attempts.append(a)
        a.task = asyncio.ensure_future(forward(self.gw, _Held(self, a, self.front), ex, flight))
        a.task.add_done_callback(lambda task: self._ended(a, task))
        a.rid = self.gw.in_flight.start(ex.decision.served_lane, sent_at, lambda: a.first_at)
        return a

    def _release(self, a: _Attempt) -> None:
        """From now on `a`'s bytes go to the client: what it held first."""
        a.released = True
        if a.head is not None:
            self.front.start(*a.head)
        for chunk in a.held:
            self.front.send(chunk)
        a.held.clear()
        if a.tail is not None:
            self.front.finish(a.tail)

    def _count(self, outcome: str) -> None:
        """One more deadline of this lane's, by what it did: won, lost, failed, or a Decline."""
        key = (self.plan.lane, self.plan.target, outcome)
        self.gw.stats.rescues[key] += 1

    def _at(self, when: float, callback: Callable[[], object]) -> asyncio.TimerHandle:
        timer = asyncio.get_running_loop().call_later(max(0.0, when - perf_counter()), callback)
        self._timers.append(timer)
        return timer
