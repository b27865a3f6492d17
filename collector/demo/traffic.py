"""Mixed user traffic through the gateway: Poisson arrivals of the three request classes.

`next_arrival` and `pick_class` are pure (a seeded random source passed in); `Traffic` sends
each arrival as a streamed chat completion with an aiohttp client (httpx's client costs
far more CPU per chunk with many open streams), bounded by a cap on requests in
flight, and counts which lane served each class (the gateway's `x-lanewatch-lane`, or the
header its router names the serving lane in).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from lanewatch.collector.common.headers import (
    CLASS_HEADER,
    DEGRADED_HEADER,
    LANE_HEADER,
    MODEL_HEADER,
    RESCUE_HEADER,
    RESCUED_HEADER,
)
from lanewatch.collector.probe.prompts import prompt_text
from lanewatch.collector.probe.settings import DEFAULT_CLASSES, RequestClass

__all__ = [
    "MIX",
    "Noise",
    "Served",
    "Timed",
    "Traffic",
    "TrafficClass",
    "mix_of",
    "next_arrival",
    "noise_of",
    "pick_class",
    "routed_lane",
]

FAST_MAX_TOKENS = 32
MAX_HISTORY = 100_000  # the gateway's rule in configs.lanewatch_config: up to this goes fast


@dataclass(frozen=True)
class TrafficClass:
    """A request class and its share of the arrivals."""

    spec: RequestClass
    weight: float

    @property
    def name(self) -> str:
        """The class name (sent as x-lanewatch-class)."""
        return self.spec.name


WEIGHTS = (0.5, 0.25, 0.25)


def mix_of(classes: Sequence[RequestClass], weights: Sequence[float] = WEIGHTS) -> tuple[TrafficClass, ...]:
    """The probe's classes as traffic, so tap and probe records line up: many short questions,
    fewer long jobs."""
    return tuple(TrafficClass(c, w) for c, w in zip(classes, weights, strict=True))


MIX: tuple[TrafficClass, ...] = mix_of(DEFAULT_CLASSES)


def next_arrival(rng: random.Random, rate_per_s: float) -> float:
    """Seconds to the next arrival of a Poisson process with this rate."""
    return rng.expovariate(rate_per_s)


def pick_class(rng: random.Random, mix: Sequence[TrafficClass]) -> TrafficClass:
    """A class drawn by weight."""
    return rng.choices(list(mix), weights=[c.weight for c in mix])[0]


def routed_lane(cls: TrafficClass, fast_max_tokens: int = FAST_MAX_TOKENS) -> str:
    """The lane the gateway's rules route a class to, before any degrade."""
    return "fast" if cls.spec.max_tokens <= fast_max_tokens else "slow"


@dataclass(frozen=True)
class Noise:
    """What real clients do besides streaming promptly: shares of the arrivals that ask for a
    whole answer (no stream), upload their body slowly, or leave before the answer ends. None of
    it says anything about a lane's TTFT, so none of it may move traffic."""

    non_streamed: float = 0.0
    slow_upload: float = 0.0
    upload_s: float = 1.5  # a slow upload sends its body over this long
    disconnect: float = 0.0
    disconnect_after_s: float = 0.3

    def __post_init__(self) -> None:
        shares = (self.non_streamed, self.slow_upload, self.disconnect)
        if any(not 0.0 <= s <= 1.0 for s in shares) or self.slow_upload + self.disconnect > 1.0:
            raise ValueError(f"noise shares must lie in [0, 1], slow_upload + disconnect <= 1: {self}")


@dataclass(frozen=True, slots=True)
class _Manner:
    """How one arrival is sent."""

    stream: bool = True
    upload_s: float = 0.0  # 0: the body at once
    leave_after_s: float | None = None  # None: read the answer to its end


def noise_of(rng: random.Random, noise: Noise) -> _Manner:
    """How the next arrival behaves under `noise`: streamed or not, then at most one of a slow
    upload or an early disconnect."""
    stream = rng.random() >= noise.non_streamed
    pick = rng.random()
    if pick < noise.slow_upload:
        return _Manner(stream, upload_s=noise.upload_s)
    if pick < noise.slow_upload + noise.disconnect:
        return _Manner(stream, leave_after_s=noise.disconnect_after_s)
    return _Manner(stream)


@dataclass(frozen=True)
class Served:
    """One answered request: when, its class, the lane it was routed to and the lane that served it."""

    t: float  # Unix seconds, when the response headers arrived
    request_class: str
    routed: str
    served: str
    degraded: str
    status: int
    model: str = ""  # the gateway's x-lanewatch-model: `<requested> -> <served>`
    rescued: bool = False  # a faster lane answered for a late one (x-lanewatch-rescued-from): no shift


@dataclass(frozen=True, slots=True)
class Timed:
    """One streamed request sent at once and read to its end, as its client saw it: its TTFT is the
    lanes' (a slow upload's or an early leaver's is not)."""

    sent_at: float  # Unix seconds
    routed: str
    served: str
    rescue_off: bool  # sent with x-lanewatch-rescue: off
    ttft_s: float | None  # to the first chunk carrying content; None without one


_CONTENT = re.compile(rb'"(?:content|text)":"[^"]')  # a delta (chat) or choice (completions) with text


class Traffic:
    """Sends Poisson traffic to the gateway until stopped; at most `max_inflight` requests at once."""

    def __init__(
        self,
        gateway_url: str,
        model: str,
        rate_per_s: float,
        seed: int = 0,
        mix: Sequence[TrafficClass] = MIX,
        max_inflight: int = 64,
        recent_s: float = 10.0,
        fast_max_tokens: int = FAST_MAX_TOKENS,
        timeout_s: float = 120.0,
        models: Mapping[str, str] | None = None,
        lane_header: str = LANE_HEADER,
        noise: Noise | None = None,
        rescue_off: float = 0.0,
    ) -> None:
        """`rescue_off`: the share of arrivals that opt out of the gateway's rescue, so one run measures
        requests with and without it side by side."""
        self.url = f"{gateway_url}/v1/chat/completions"
        self.model = model
        # routed lane -> the model asked for, where the client picks the tier (LiteLLM's model groups)
        self.models = dict(models or {})
        self.lane_header = lane_header  # the response header that names the serving lane
        self.rate_per_s = rate_per_s
        self.mix = tuple(mix)
        self.max_inflight = max_inflight
        self.recent_s = recent_s
        self.fast_max_tokens = fast_max_tokens  # the gateway's rule: up to this goes fast
        self.timeout_s = timeout_s  # a request open this long is given up
        self._rng = random.Random(seed)
        self.noise = noise or Noise()
        self._noise_rng = random.Random(seed + 1)  # apart, so a seed's classes stay the same with noise
        self.rescue_off = rescue_off
        self._rescue_rng = random.Random(seed + 2)
        self.timings: deque[Timed] = deque(maxlen=MAX_HISTORY)
        self.manners: Counter[str] = Counter()  # non_streamed | slow_upload | disconnect -> sent
        self._seq = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.skipped = 0  # arrivals dropped because max_inflight requests were open
        self.errors: Counter[str] = Counter()
        self.recent: deque[Served] = deque()
        self.history: deque[Served] = deque(maxlen=MAX_HISTORY)

    @property
    def inflight(self) -> int:
        """Requests open now."""
        return len(self._tasks)

    async def run(
        self, stop: asyncio.Event, drain_s: float = 0.0, abort: asyncio.Event | None = None
    ) -> None:
        """Send arrivals until `stop` is set; give open requests `drain_s` seconds (cut short by
        `abort`), then cancel them."""
        timeout = aiohttp.ClientTimeout(total=self.timeout_s, sock_connect=5)
        connector = aiohttp.TCPConnector(limit=self.max_inflight)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            next_at = time.monotonic()
            while not stop.is_set():
                next_at += next_arrival(self._rng, self.rate_per_s)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.monotonic()))
                    break
                self._arrive(session)
            await self._drain(drain_s, abort)
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _drain(self, grace_s: float, abort: asyncio.Event | None) -> None:
        if not self._tasks or grace_s <= 0 or (abort is not None and abort.is_set()):
            return
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(asyncio.wait(set(self._tasks)))}
        if abort is not None:
            waits.add(asyncio.ensure_future(abort.wait()))
        _, pending = await asyncio.wait(waits, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED)
        for fut in pending:
            fut.cancel()

    def _arrive(self, session: aiohttp.ClientSession) -> None:
        cls = pick_class(self._rng, self.mix)
        if self.inflight >= self.max_inflight:
            self.skipped += 1
            return
        self._seq += 1
        task = asyncio.create_task(self._send(session, cls, self._seq))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def model_for(self, cls: TrafficClass) -> str:
        """The model a request of `cls` asks for: its routed lane's in `models`, else `model`."""
        return self.models.get(routed_lane(cls, self.fast_max_tokens), self.model)

    async def _send(self, session: aiohttp.ClientSession, cls: TrafficClass, seq: int) -> None:
        manner = noise_of(self._noise_rng, self.noise)
        body = {
            "model": self.model_for(cls),
            "messages": [{"role": "user", "content": prompt_text(cls.spec, seq)}],
            "max_tokens": cls.spec.max_tokens,
            "ignore_eos": True,
            "stream": manner.stream,
        }
        self._count(manner)
        self.sent += 1
        data = json.dumps(body).encode()
        headers = _headers(cls)
        if self.rescue_off and self._rescue_rng.random() < self.rescue_off:
            headers[RESCUE_HEADER] = "off"
        try:
            if manner.leave_after_s is None:
                await self._exchange(session, cls, data, headers, manner.upload_s, timed=manner.stream)
            else:  # the client gives up early: the request is cancelled, its connection closed
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(manner.leave_after_s):
                        await self._exchange(session, cls, data, headers, manner.upload_s)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.errors[type(exc).__name__] += 1

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        cls: TrafficClass,
        data: bytes,
        headers: dict[str, str],
        upload_s: float,
        timed: bool = False,
    ) -> None:
        payload: bytes | Any = data
        if upload_s > 0:  # Content-Length up front, the bytes dribbled: the client holds its body
            headers = {**headers, "content-length": str(len(data))}
            payload = _dribble(data, upload_s)
            timed = False
        sent_at, t0 = time.time(), time.perf_counter()
        first: float | None = None
        async with session.post(self.url, data=payload, headers=headers) as resp:
            # Counted at the headers, which name the serving lane: the view follows a shift at once.
            lane, degraded = (
                resp.headers.get(self.lane_header, "?"),
                resp.headers.get(DEGRADED_HEADER, ""),
            )
            self._served(
                cls,
                resp.status,
                lane,
                degraded,
                resp.headers.get(MODEL_HEADER, ""),
                RESCUED_HEADER in resp.headers,
            )
            async for chunk in resp.content.iter_any():
                if first is None and _CONTENT.search(chunk):
                    first = time.perf_counter() - t0
        if timed and resp.status == 200:
            routed = routed_lane(cls, self.fast_max_tokens)
            self.timings.append(Timed(sent_at, routed, lane, RESCUE_HEADER in headers, first))

    def _count(self, manner: _Manner) -> None:
        if not manner.stream:
            self.manners["non_streamed"] += 1
        if manner.upload_s > 0:
            self.manners["slow_upload"] += 1
        if manner.leave_after_s is not None:
            self.manners["disconnect"] += 1

    def _served(
        self, cls: TrafficClass, status: int, lane: str, degraded: str, model: str, rescued: bool = False
    ) -> None:
        if status != 200:
            self.errors[f"http_{status}"] += 1
        served = Served(
            time.time(),
            cls.name,
            routed_lane(cls, self.fast_max_tokens),
            lane,
            degraded,
            status,
            model,
            rescued,
        )
        self.recent.append(served)
        self.history.append(served)
        self._trim()

    def _trim(self) -> None:
        horizon = time.time() - self.recent_s
        while self.recent and self.recent[0].t < horizon:
            self.recent.popleft()

    def shifted_share(self, routed: str, to: str) -> tuple[float, int] | None:
        """Share of recent requests routed to `routed` that `to` served, and how many; None if none. A
        request a faster lane answered for a late one is the rescue's, not a shift's: left out."""
        self._trim()
        rows = [s for s in self.recent if s.routed == routed and s.status == 200 and not s.rescued]
        if not rows:
            return None
        return sum(s.served == to for s in rows) / len(rows), len(rows)


async def _dribble(data: bytes, seconds: float, pieces: int = 4) -> AsyncIterator[bytes]:
    """`data` in `pieces` parts, the last sent `seconds` after the first."""
    step = -(-len(data) // pieces)
    for i in range(0, len(data), step):
        if i:
            await asyncio.sleep(seconds / (pieces - 1))
        yield data[i : i + step]


def _headers(cls: TrafficClass) -> dict[str, str]:
    return {"content-type": "application/json", CLASS_HEADER: cls.name}
