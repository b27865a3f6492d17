"""`webhook`: any router behind an HTTP endpoint of the operator's own, a signed JSON POST.

The body is the whole state, `{"lanes": {lane: {"shift_to", "shift_percent",
"cap_max_tokens", "shed_classes"}}, "revision": n}`, the same per-lane object as the
gateway's admin API, signed with HMAC-SHA256 over `<timestamp>.<body>`
(`X-Lanewatch-Timestamp`, `X-Lanewatch-Signature: sha256=<hex>`). Any 2xx is success.

- Shift, cap max_tokens and shed: the receiver maps each field onto its router; the
  controller sends all three and cannot tell what the receiver did with them.
- Read-back: none; the endpoint is write-only, so status shows what was sent.
- Cannot: confirm the router took the state beyond the 2xx.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar, Literal

import httpx

from lanewatch.collector.common.headers import SIGNATURE_HEADER, TIMESTAMP_HEADER
from lanewatch.collector.degrade_state.wire import LaneDegrade

from ..state import lanes_to_json
from .base import ALL_ACTIONS, Adapter, Capability, RouterView, read_secret
from .http import HttpAdapterSettings, Retry, Sleep, send

__all__ = ["WebhookAdapter", "WebhookSettings", "sign"]

log = logging.getLogger("lanewatch.degrade.adapters")


def sign(key: bytes, timestamp: str, body: bytes) -> str:
    """The signature header value for a body sent at `timestamp`."""
    digest = hmac.new(key, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


class WebhookAdapter:
    """Any router: POST `{"lanes": ..., "revision": n}` as JSON, signed with HMAC-SHA256."""

    capabilities: frozenset[Capability] = ALL_ACTIONS

    def __init__(
        self,
        url: str,
        key: bytes | None,
        *,
        name: str = "webhook",
        timeout_s: float = 5.0,
        retry: Retry = Retry(),
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self._url = url
        self._client = httpx.AsyncClient(timeout=timeout_s, transport=transport)
        self._key = key
        self._timeout_s = timeout_s
        self._retry = retry
        self._sleep = sleep
        self._clock = clock

    def __repr__(self) -> str:
        return f"WebhookAdapter({self._url!r})"

    async def apply(self, lanes: dict[str, LaneDegrade], revision: int) -> None:
        """POST the state; any 2xx is success."""
        payload = {**lanes_to_json(lanes), "revision": revision}
        body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()

        def build() -> httpx.Request:
            stamp = str(int(self._clock()))  # fresh per attempt, so a retry is not refused as old
            headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: stamp}
            if self._key is not None:
                headers[SIGNATURE_HEADER] = sign(self._key, stamp, body)
            return self._client.build_request("POST", self._url, content=body, headers=headers)

        await send(self._client, build, self._retry, self._sleep, self._timeout_s)

    async def read_back(self) -> RouterView | None:
        """None: a webhook cannot be asked what its router holds."""
        return None

    async def finalize(self, revision: int) -> None:
        """POST the empty state: no degrade on any lane."""
        await self.apply({}, revision)

    async def shutdown(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


class WebhookSettings(HttpAdapterSettings):
    """A signed JSON POST of the whole state to `url`, for a router of the operator's own."""

    kind: Literal["webhook"] = "webhook"
    secret_file: Path | None = None  # HMAC-SHA256 key for the signature header; without it, unsigned

    capabilities: ClassVar[frozenset[Capability]] = WebhookAdapter.capabilities
    legacy_keys: ClassVar[Mapping[str, str]] = {
        **HttpAdapterSettings.legacy_keys,
        "webhook_url": "url",
        "webhook_secret_file": "secret_file",
    }

    def build(self) -> Adapter:
        """The adapter, with the HMAC key read from `secret_file`."""
        if self.secret_file is None:
            log.warning("adapter %s: no secret_file: webhook posts are not signed", self.label)
        key = read_secret(self.secret_file, "webhook secret file") if self.secret_file else None
        return WebhookAdapter(
            self.url,
            key.encode() if key else None,
            name=self.label,
            timeout_s=self.timeout_s,
            retry=self.retry,
        )
