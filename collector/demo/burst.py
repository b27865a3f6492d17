"""The real-engine fault: a burst of long-prompt requests sent straight to one lane's vLLM.

Another client of the slow lane's server (a batch job, say) keeps `concurrency` long-prompt
requests open at once, each starting as the one before it ends. Each prompt's prefill holds
the engine for a while, so the queue fills and every other request's time to first token
grows past the SLO. `stop` ends it: no new request, and open ones are cancelled (vLLM aborts a
request whose client went away), so the queue drains as a cleared fault would.
The burst bypasses the gateway: shifting the gateway's traffic does not move it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

__all__ = ["Burst", "BurstSpec", "burst_body"]


@dataclass(frozen=True)
class BurstSpec:
    """How hard the burst pushes: requests open at once, prompt words each, tokens each answer."""

    concurrency: int = 6
    prompt_words: int = 600
    max_tokens: int = 16

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


class Burst:
    """Runs a BurstSpec against one server's chat endpoint from `start` until `stop`."""

    def __init__(self, base_url: str, model: str, spec: BurstSpec) -> None:
        self.url = f"{base_url}/v1/chat/completions"
        self.model = model
        self.spec = spec
        self.sent = 0
        self.finished = 0
        self.errors: Counter[str] = Counter()
        self._tasks: list[asyncio.Task[None]] = []
        self._session: aiohttp.ClientSession | None = None

    def start(self) -> None:
        """Open `concurrency` request loops."""
        timeout = aiohttp.ClientTimeout(total=600, sock_connect=5)
        self._session = aiohttp.ClientSession(timeout=timeout)
        self._tasks = [asyncio.create_task(self._loop(self._session)) for _ in range(self.spec.concurrency)]

    async def _loop(self, session: aiohttp.ClientSession) -> None:
        while True:
            self.sent += 1
            body = burst_body(self.spec, self.model, self.sent)
            try:
                async with session.post(self.url, data=json.dumps(body), headers=_JSON) as resp:
                    ok = resp.status == 200
                    async for _ in resp.content.iter_any():
                        pass
                if ok:
                    self.finished += 1
                else:
                    self.errors[f"http_{resp.status}"] += 1
                    await asyncio.sleep(1.0)  # a refusing server is not hammered
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.errors[type(exc).__name__] += 1
                await asyncio.sleep(1.0)

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
        """Requests sent and finished, errors by kind."""
        return {"sent": self.sent, "finished": self.finished, "errors": dict(self.errors)}


_JSON = {"content-type": "application/json"}
