"""Learning a lane's models from its upstreams' `GET /v1/models` (OpenAI's list format).

Only lanes that declare no models learn: a declaration always wins. Each upstream is asked at
gateway start and every `model_discovery.interval_s`; an answer is read up to `max_bytes` within
`timeout_s`, and its `data[].id` names (at most `max_models` a lane) become the lane's models. An
upstream that fails to answer (down, 404, not JSON, an empty list) keeps the names it last gave,
so a restarting engine never makes its lane forget. The parse and the bookkeeping are pure; the
HTTP call is `fetch_models`, passed in as `Fetch` so tests can replace it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import aiohttp

from lanewatch.collector.common.errors import UpstreamError

__all__ = [
    "DiscoveryError",
    "Fetch",
    "ModelLearner",
    "fetch_models",
    "parse_models",
    "refresh_safely",
    "run_discovery",
]

log = logging.getLogger("lanewatch.gateway.models")
MAX_NAME_CHARS = 256  # longer ids are skipped: each name is a metric label value and a header part
Fetch = Callable[[str, str], Awaitable[bytes]]  # (lane, upstream base URL) -> the /v1/models body


class DiscoveryError(UpstreamError):
    """An upstream's model list could not be had; the message is safe to log and show."""


def parse_models(body: bytes, max_models: int) -> tuple[str, ...]:
    """The model ids of a `/v1/models` answer, in order, each once, at most `max_models`."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise DiscoveryError("the answer is not JSON") from None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise DiscoveryError("the answer has no 'data' list")
    ids = (e.get("id") for e in entries if isinstance(e, dict))
    names = tuple(dict.fromkeys(i for i in ids if isinstance(i, str) and _usable(i)))
    if not names:
        raise DiscoveryError("the answer lists no usable model id")
    return names[:max_models]


def _usable(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME_CHARS and name.isprintable() and name.strip() == name


class ModelLearner:
    """What each lane's upstreams last listed, and how their last asking went."""

    def __init__(
        self,
        upstreams: Mapping[str, Sequence[str]],
        fetch: Fetch,
        max_models: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._upstreams = {lane: tuple(urls) for lane, urls in upstreams.items()}
        self._fetch = fetch
        self._max = max_models
        self._clock = clock
        self._listed: dict[tuple[str, str], tuple[str, ...]] = {}
        self.errors: dict[str, str] = {}  # lane -> the last round's failure, when one upstream failed
        self.checked_at: dict[str, float] = {}  # lane -> unix time of its last round
        self.failures: Counter[str] = Counter()  # lane -> upstream answers that could not be used

    @property
    def lanes(self) -> tuple[str, ...]:
        """The lanes that learn their models."""
        return tuple(self._upstreams)

    def models(self) -> dict[str, tuple[str, ...]]:
        """Each lane's learned models: its upstreams' lists merged in upstream order (none: left out)."""
        out: dict[str, tuple[str, ...]] = {}
        for lane, urls in self._upstreams.items():
            merged = dict.fromkeys(m for url in urls for m in self._listed.get((lane, url), ()))
            if merged:
                out[lane] = tuple(merged)[: self._max]
        return out

    async def refresh(self) -> bool:
        """Ask every upstream once, concurrently; True when some lane's models changed."""
        before = self.models()
        pairs = [(lane, url) for lane, urls in self._upstreams.items() for url in urls]
        answers = await asyncio.gather(*(self._ask(lane, url) for lane, url in pairs))
        now = self._clock()
        errors: dict[str, str] = {}
        for (lane, url), answer in zip(pairs, answers, strict=True):
            self.checked_at[lane] = now
            if isinstance(answer, DiscoveryError):
                self.failures[lane] += 1
                errors.setdefault(lane, str(answer))
            else:
                self._listed[(lane, url)] = answer
        self.errors = errors
        after = self.models()
        for lane in sorted(set(after) | set(before)):
            if after.get(lane) != before.get(lane):
                log.warning("lane %s serves models %s (its upstreams' /v1/models)", lane, after.get(lane))
        return after != before

    async def _ask(self, lane: str, url: str) -> tuple[str, ...] | DiscoveryError:
        try:
            return parse_models(await self._fetch(lane, url), self._max)
        except DiscoveryError as exc:
            return exc


async def fetch_models(
    session: aiohttp.ClientSession,
    url: str,
    *,
    headers: Mapping[str, str],
    tls: ssl.SSLContext,
    timeout_s: float,
    max_bytes: int,
) -> bytes:
    """`GET <url>/v1/models`, its body read up to `max_bytes` within `timeout_s`; else DiscoveryError."""
    try:
        async with asyncio.timeout(timeout_s):
            limit = aiohttp.ClientTimeout(total=timeout_s)  # not the session's, kept for health checks
            async with session.get(url + "/v1/models", headers=dict(headers), ssl=tls, timeout=limit) as resp:
                if resp.status != 200:
                    raise DiscoveryError(f"GET /v1/models answered {resp.status}")
                return await _read_capped(resp, max_bytes)
    except TimeoutError:
        raise DiscoveryError(f"GET /v1/models took longer than {timeout_s:g} s") from None
    except (aiohttp.ClientError, OSError) as exc:  # the type only: a message may carry the URL
        raise DiscoveryError(f"GET /v1/models failed: {type(exc).__name__}") from None


async def _read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    if resp.content_length is not None and resp.content_length > max_bytes:
        raise DiscoveryError(f"the answer is larger than {max_bytes} bytes")
    body = bytearray()
    while chunk := await resp.content.read(64 * 1024):
        body += chunk
        if len(body) > max_bytes:
            raise DiscoveryError(f"the answer is larger than {max_bytes} bytes")
    return bytes(body)


async def run_discovery(
    learner: ModelLearner,
    interval_s: float,
    on_change: Callable[[], Any],
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> None:
    """Refresh every `interval_s` (the first round is the caller's) and call `on_change` after a change."""
    while True:
        await sleep(interval_s)
        if await refresh_safely(learner):
            on_change()


async def refresh_safely(learner: ModelLearner) -> bool:
    """`learner.refresh()`, a bug in it logged rather than raised: it must not stop the gateway."""
    try:
        return await learner.refresh()
    except Exception:
        log.exception("model discovery round failed")
        return False
