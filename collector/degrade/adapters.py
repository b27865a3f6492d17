"""Adapters: how the intended degrade state reaches a router, always whole and declarative.

- `GatewayAdapter`: lanewatch's gateway admin API (docs/gateway.md), `PUT /admin/degrade`.
- `WebhookAdapter`: any router behind an HTTP endpoint: a JSON POST signed with HMAC-SHA256.
- `DryRunAdapter`: logs what it would apply.

Each `apply` sends the whole desired state, so sending it again is harmless; the controller's
reconcile loop does exactly that, which is how a failed call or a restarted router catches up.
Calls retry with exponential backoff on connection errors, timeouts, 429 and 5xx. Secrets
(bearer tokens, HMAC keys) are held privately and never appear in errors, logs or reprs.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx

from lanewatch.collector.common.headers import AUTHORIZATION, SIGNATURE_HEADER, TIMESTAMP_HEADER

from .state import LaneSpec, lanes_to_json

__all__ = [
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "Adapter",
    "AdapterError",
    "DryRunAdapter",
    "GatewayAdapter",
    "Retry",
    "WebhookAdapter",
    "sign",
]

log = logging.getLogger("lanewatch.degrade.adapters")

Sleep = Callable[[float], Awaitable[None]]


class AdapterError(Exception):
    """An apply that failed; the message is safe to log (no secrets, no bodies we sent)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


class Adapter(Protocol):
    """Something that makes a router hold the desired degrade state."""

    name: str

    async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
        """Make the router hold exactly `lanes` (a lane absent has no degrade); AdapterError if not."""

    async def shutdown(self) -> None:
        """Release connections."""


@dataclass(frozen=True)
class Retry:
    """Attempts per apply and the exponential backoff between them."""

    attempts: int = 3
    backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number `attempt` (0-based)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2**attempt))


async def _send(
    client: httpx.AsyncClient, build: Callable[[], httpx.Request], retry: Retry, sleep: Sleep
) -> httpx.Response:
    """Send a request built afresh per attempt; retry what may succeed later."""
    error = AdapterError("no attempt made", retryable=False)
    for attempt in range(retry.attempts):
        try:
            response = await client.send(build())
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


class GatewayAdapter:
    """lanewatch gateway: `PUT /admin/degrade` with the whole state, bearer token auth."""

    name = "gateway"

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout_s: float = 5.0,
        retry: Retry = Retry(),
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._client = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout_s, transport=transport)
        self._headers = {AUTHORIZATION: f"Bearer {token}"} if token else {}
        self._retry = retry
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"GatewayAdapter({str(self._client.base_url)!r})"

    async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
        """PUT the state and check the gateway answers with the same lanes."""
        body = lanes_to_json(lanes, revision)
        response = await _send(
            self._client,
            lambda: self._client.build_request("PUT", "/admin/degrade", json=body, headers=self._headers),
            self._retry,
            self._sleep,
        )
        held = _active_lanes(_json(response).get("lanes"))
        if held != {lane: spec for lane, spec in lanes.items() if spec.active()}:
            raise AdapterError("gateway answered with a different degrade state", retryable=True)

    async def fetch(self) -> dict[str, Any]:
        """The gateway's current degrade state (`GET /admin/degrade`), with lane_order and version."""
        response = await _send(
            self._client,
            lambda: self._client.build_request("GET", "/admin/degrade", headers=self._headers),
            self._retry,
            self._sleep,
        )
        return _json(response)

    async def shutdown(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        raise AdapterError("gateway answered with a body that is not JSON", retryable=True) from None
    if not isinstance(data, dict):
        raise AdapterError("gateway answered with JSON that is not an object", retryable=True)
    return data


def _active_lanes(raw: object) -> dict[str, LaneSpec]:
    if not isinstance(raw, dict):
        raise AdapterError("gateway answer has no 'lanes' object", retryable=True)
    try:
        specs = {lane: LaneSpec.from_json(v) for lane, v in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise AdapterError("gateway answer has a malformed lane", retryable=True) from None
    return {
        lane: replace(s, shed_classes=tuple(sorted(s.shed_classes)))
        for lane, s in specs.items()
        if s.active()
    }


def sign(key: bytes, timestamp: str, body: bytes) -> str:
    """The signature header value for a body sent at `timestamp`."""
    digest = hmac.new(key, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class WebhookAdapter:
    """Any router: POST `{"lanes": ..., "revision": n}` as JSON, signed with HMAC-SHA256."""

    name = "webhook"

    def __init__(
        self,
        url: str,
        key: bytes | None,
        *,
        timeout_s: float = 5.0,
        retry: Retry = Retry(),
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._url = url
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport)
        self._key = key
        self._retry = retry
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:
        return f"WebhookAdapter({self._url!r})"

    async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
        """POST the state; any 2xx is success."""
        payload = {**lanes_to_json(lanes), "revision": revision}
        body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()

        def build() -> httpx.Request:
            stamp = str(int(self._clock()))  # fresh per attempt, so a retry is not refused as old
            headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: stamp}
            if self._key is not None:
                headers[SIGNATURE_HEADER] = sign(self._key, stamp, body)
            return self._client.build_request("POST", self._url, content=body, headers=headers)

        await _send(self._client, build, self._retry, self._sleep)

    async def shutdown(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


class DryRunAdapter:
    """Logs each new desired state; changes nothing anywhere."""

    name = "dry-run"

    def __init__(self) -> None:
        self._last: str | None = None

    async def apply(self, lanes: dict[str, LaneSpec], revision: int) -> None:
        """Log the state when it differs from the last one logged."""
        text = json.dumps(lanes_to_json(lanes), sort_keys=True)
        if text != self._last:
            log.info("dry-run: would apply revision %d: %s", revision, text)
            self._last = text

    async def shutdown(self) -> None:
        """Nothing to release."""
