"""The real-engine fault: a burst of long-prompt requests sent straight to one lane's vLLM.

Another client of the slow lane's server (a batch job, say) keeps long-prompt requests open,
each starting as the one before it ends. Each prompt's prefill holds the engine for a while, so
the queue fills and every other request's time to first token grows past the SLO. `stop` ends
it: no new request, and open ones are cancelled (vLLM aborts a request whose client went away),
so the queue drains as a cleared fault would. The burst bypasses the gateway: shifting the
gateway's traffic does not move it.

How many to keep open depends on the machine: a request arriving behind `n` open prompts waits
for about `n` prefills, and a prefill takes 2 s on one machine and 7 s on another. So with
`queue_slos` set, the burst first sends one prompt alone, times it to its first body chunk (vLLM
sends the first chunk with the first token), and keeps open enough to queue `queue_slos` times
the lane's TTFT SLO, at most `concurrency`: the same breach on a quiet machine and a loaded one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

__all__ = ["Burst", "BurstSpec", "burst_body", "open_for"]


@dataclass(frozen=True)
class BurstSpec:
    """How hard the burst pushes: requests open at once (at most, with `queue_slos`), prompt words
    each, tokens each answer, and the queue to build in multiples of the lane's TTFT SLO (None:
    open `concurrency` at once)."""

    concurrency: int = 6
    prompt_words: int = 600
    max_tokens: int = 16
    queue_slos: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The summary.json form ({"burst": {...}})."""
        return {"burst": asdict(self)}


def burst_body(spec: BurstSpec, model: str, seq: int) -> dict[str, Any]:
    """One burst request: a distinct long prompt (no prefix-cache hit), streamed, `max_tokens` long."""
    # Each word differs by its number, so every prompt is new work for the engine.
    words = " ".join(f"batch{seq}-{i}" for i in range(spec.prompt_words))
    return {
        "model": model,
        "messages": [{"role": "user", "content": f"Summarize: {words}"}],
        "max_tokens": spec.max_tokens,
        "ignore_eos": True,
        "stream": True,
    }


def open_for(spec: BurstSpec, solo_s: float | None, slo_s: float | None) -> int:
    """Requests to keep open: prompts of `solo_s` each to queue `queue_slos` x `slo_s`, 1..concurrency.

    Without a queue goal, an SLO or a timing (the solo request failed): the most, `concurrency`.
    """
    if spec.queue_slos is None or slo_s is None or solo_s is None or solo_s <= 0:
        return spec.concurrency
    return max(1, min(spec.concurrency, math.ceil(spec.queue_slos * slo_s / solo_s)))


class Burst:
    """Runs a BurstSpec against one server's chat endpoint from `start` until `stop`."""

    def __init__(self, base_url: str, model: str, spec: BurstSpec, ttft_slo_s: float | None = None) -> None:
        self.url = f"{base_url}/v1/chat/completions"
        self.model = model
        self.spec = spec
        self.ttft_slo_s = ttft_slo_s  # the lane's TTFT SLO, which `queue_slos` counts in
        self.sent = 0
        self.finished = 0
        self.solo_s: float | None = None  # one prompt alone, to its first body chunk (with `queue_slos`)
        self.open = 0  # requests kept open, once decided
        self.errors: Counter[str] = Counter()
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        """Start the burst: one timed prompt first when it sizes itself, then the request loops."""
        timeout = aiohttp.ClientTimeout(total=600, sock_connect=5)
        self._session = aiohttp.ClientSession(timeout=timeout)
        self._tasks = [asyncio.create_task(self._open(self._session))]

    async def _open(self, session: aiohttp.ClientSession) -> None:
        if self.spec.queue_slos is not None and self.ttft_slo_s is not None:
            self.solo_s = await self._one(session)
        self.open = open_for(self.spec, self.solo_s, self.ttft_slo_s)
        self._tasks += [asyncio.create_task(self._loop(session)) for _ in range(self.open)]

    async def _loop(self, session: aiohttp.ClientSession) -> None:
        while True:
            if await self._one(session) is None:
                await asyncio.sleep(1.0)  # a refusing server is not hammered

    async def _one(self, session: aiohttp.ClientSession) -> float | None:
        """One burst request to its end: seconds to its first body chunk, None if it failed."""
        self.sent += 1
        body = burst_body(self.spec, self.model, self.sent)
        began, first = time.monotonic(), None
        try:
            async with session.post(self.url, data=json.dumps(body), headers=_JSON) as resp:
                async for _ in resp.content.iter_any():
                    first = first or time.monotonic() - began
            if resp.status == 200:
                self.finished += 1
                return first
            self.errors[f"http_{resp.status}"] += 1
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.errors[type(exc).__name__] += 1
        return None

    async def stop(self) -> None:
        """Cancel every open request and close the client."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._session is not None:
            with contextlib.suppress(aiohttp.ClientError):
                await self._session.close()
            self._session = None

    def stats(self) -> Mapping[str, Any]:
        """Requests sent and finished, errors by kind, and how many it kept open (and why)."""
        solo = None if self.solo_s is None else round(self.solo_s, 3)
        return {
            "sent": self.sent,
            "finished": self.finished,
            "errors": dict(self.errors),
            "open": self.open,
            "solo_s": solo,
        }


_JSON = {"content-type": "application/json"}
