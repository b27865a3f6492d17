"""What the HTTP adapters share: their settings, retries with backoff, and reading a JSON answer.

Calls retry with exponential backoff on connection errors, timeouts, 429 and 5xx; any other
answer fails at once. A call has a total deadline (`timeout_s`), not only httpx's per-read one,
which a peer sending one byte at a time never trips. Errors carry the status and a bounded,
one-line reason, never a request body or a secret.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
from pydantic import Field

from lanewatch.collector.common.validation import HttpUrl

from .base import AdapterError, AdapterSettings

__all__ = ["HttpAdapterSettings", "Retry", "Sleep", "json_object", "send"]

Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True)
class Retry:
    """Attempts per apply and the exponential backoff between them."""

    attempts: int = 3
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (0-based)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2**attempt))


class HttpAdapterSettings(AdapterSettings):
    """An adapter that talks HTTP to its router: where, how long to wait, how often to try."""

    url: HttpUrl
    timeout_s: float = Field(default=5.0, gt=0)  # one call, whole: connect, send, the answer read
    attempts: int = Field(default=3, ge=1, le=20)  # per apply, with exponential backoff

    legacy_keys: ClassVar[Mapping[str, str]] = {
        "adapter_timeout_s": "timeout_s",
        "adapter_attempts": "attempts",
    }

    @property
    def retry(self) -> Retry:
        """The retry schedule of this entry."""
        return Retry(attempts=self.attempts)


async def send(
    client: httpx.AsyncClient,
    build: Callable[[], httpx.Request],
    retry: Retry,
    sleep: Sleep,
    timeout_s: float | None = None,
) -> httpx.Response:
    """Send a request built afresh per attempt, each within `timeout_s`; retry what may succeed later."""
    error = AdapterError("no attempt made", retryable=False)
    for attempt in range(retry.attempts):
        try:
            async with asyncio.timeout(timeout_s):
                response = await client.send(build())
        except TimeoutError:
            error = AdapterError(f"timed out (no whole answer within {timeout_s:g} s)", retryable=True)
        except httpx.TimeoutException as exc:
            error = AdapterError(f"timed out ({type(exc).__name__})", retryable=True)
        except httpx.TransportError as exc:
            error = AdapterError(f"{type(exc).__name__}: {exc}", retryable=True)
        else:
            if response.is_success:
                return response
            retryable = response.status_code == 429 or response.status_code >= 500
            error = AdapterError(f"HTTP {response.status_code}: {_reason(response)}", retryable=retryable)
            if not retryable:
                raise error
        if attempt + 1 < retry.attempts:
            await sleep(retry.delay(attempt))
    raise error


def _reason(response: httpx.Response, limit: int = 300) -> str:
    text = response.text.strip().replace("\n", " ")
    return text[:limit] + ("…" if len(text) > limit else "") or response.reason_phrase


def json_object(response: httpx.Response, who: str) -> dict[str, Any]:
    """The answer's JSON object; AdapterError (retryable) naming `who` when it is not one."""
    try:
        data = response.json()
    except ValueError:
        raise AdapterError(f"{who} answered with a body that is not JSON", retryable=True) from None
    if not isinstance(data, dict):
        raise AdapterError(f"{who} answered with JSON that is not an object", retryable=True)
    return data
