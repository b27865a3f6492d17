"""`gateway`: lanewatch's own gateway, through its admin API (`PUT`/`GET /admin/degrade`).

- Shift: the lane's `shift_to` and `shift_percent`; the gateway serves that share of the
  lane's requests on the faster lane (spread evenly, or a seeded draw), rewriting the model
  to one the faster lane serves where its lanes declare `models`.
- Cap max_tokens: `cap_max_tokens`; the gateway clamps `max_tokens` and
  `max_completion_tokens` in the request body (and sets it when the request had none).
- Shed: `shed_classes`; a request whose class header (`x-lanewatch-class`) names one gets
  429 with `Retry-After`.
- Read-back: `GET /admin/degrade`, the state the gateway holds, its `lane_order` and `version`.
- Cannot: shift to a lane that is not faster by the gateway's own `lane_order` (refused with
  400); keep the state across its own restart (it starts with no degrade, and the
  controller's reconcile re-applies it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx

from lanewatch.collector.common.headers import AUTHORIZATION
from lanewatch.collector.degrade_state.wire import LaneDegrade

from ..state import lanes_to_json
from .base import ALL_ACTIONS, Adapter, AdapterError, Capability, RouterView, read_secret
from .http import HttpAdapterSettings, Retry, Sleep, json_object, send

__all__ = ["GatewayAdapter", "GatewaySettings"]

log = logging.getLogger("lanewatch.degrade.adapters")


class GatewayAdapter:
    """lanewatch gateway: `PUT /admin/degrade` with the whole state, bearer token auth."""

    capabilities: frozenset[Capability] = ALL_ACTIONS

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        name: str = "gateway",
        timeout_s: float = 5.0,
        retry: Retry = Retry(),
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = name
        self._client = httpx.AsyncClient(base_url=url.rstrip("/"), timeout=timeout_s, transport=transport)
        self._headers = {AUTHORIZATION: f"Bearer {token}"} if token else {}
        self._timeout_s = timeout_s
        self._retry = retry
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"GatewayAdapter({str(self._client.base_url)!r})"

    async def apply(self, lanes: dict[str, LaneDegrade], revision: int) -> None:
        """PUT the state and check the gateway answers with the same lanes."""
        body = lanes_to_json(lanes, revision)
        response = await self._call("PUT", body)
        held = _active_lanes(json_object(response, "gateway").get("lanes"))
        if held != {lane: spec for lane, spec in lanes.items() if spec.active()}:
            raise AdapterError("gateway answered with a different degrade state", retryable=True)

    async def read_back(self) -> RouterView:
        """The gateway's degrade state (`GET /admin/degrade`): lanes, lane_order, version, revision."""
        data = json_object(await self._call("GET", None), "gateway")
        order = data.get("lane_order")
        return RouterView(
            lanes=_active_lanes(data.get("lanes")),
            lane_order=tuple(str(lane) for lane in order) if isinstance(order, list) else None,
            version=_count(data.get("version")),
            revision=_count(data.get("revision")),  # None after an operator's PUT without one
        )

    async def finalize(self, revision: int) -> None:
        """No degrade on any lane: the gateway as it starts."""
        await self.apply({}, revision)

    async def shutdown(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def _call(self, method: str, body: dict[str, Any] | None) -> httpx.Response:
        return await send(
            self._client,
            lambda: self._client.build_request(method, "/admin/degrade", json=body, headers=self._headers),
            self._retry,
            self._sleep,
            self._timeout_s,
        )


def _count(raw: object) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def _active_lanes(raw: object) -> dict[str, LaneDegrade]:
    if not isinstance(raw, dict):
        raise AdapterError("gateway answer has no 'lanes' object", retryable=True)
    try:
        specs = {lane: LaneDegrade.from_json(v) for lane, v in raw.items()}
    except (AttributeError, TypeError, ValueError):
        raise AdapterError("gateway answer has a malformed lane", retryable=True) from None
    return {
        lane: replace(s, shed_classes=tuple(sorted(s.shed_classes)))
        for lane, s in specs.items()
        if s.active()
    }


class GatewaySettings(HttpAdapterSettings):
    """The lanewatch gateway's admin API; `url` is the gateway's base URL."""

    kind: Literal["gateway"] = "gateway"
    token_file: Path | None = None  # the gateway's admin bearer token (gateway.admin_token_file)

    capabilities: ClassVar[frozenset[Capability]] = GatewayAdapter.capabilities
    legacy_keys: ClassVar[Mapping[str, str]] = {
        **HttpAdapterSettings.legacy_keys,
        "gateway_url": "url",
        "gateway_token_file": "token_file",
    }
    implied_by: ClassVar[str | None] = "gateway_url"

    def build(self) -> Adapter:
        """The adapter, with the admin token read from `token_file`."""
        if self.token_file is None:
            log.warning("adapter %s: no token_file: calling the admin API without a token", self.label)
        token = read_secret(self.token_file, "gateway token file") if self.token_file else None
        return GatewayAdapter(self.url, token, name=self.label, timeout_s=self.timeout_s, retry=self.retry)
