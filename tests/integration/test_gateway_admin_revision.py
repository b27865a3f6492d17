"""`PUT /admin/degrade` takes the sender's revision and refuses an older one with 409.

A delayed retry or a replayed body of an older state must not revert a newer one; the degrade
controller re-sends its current revision on every reconcile (taken: equal is a re-send), and a
restarted controller reads its revision back from its state dir, so it never goes backwards.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from lanewatch.collector.degrade.adapters import AdapterError, GatewayAdapter, Retry
from lanewatch.collector.degrade.metrics import DegradeMetrics
from lanewatch.collector.degrade.policy import DEFAULT_POLICY
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.store import Store
from lanewatch.collector.degrade.webhook import parse_notification
from tests.alertmanager_bodies import alert, body, encode

from .gateway_harness import RunningGateway, gateway_server

pytestmark = pytest.mark.integration
TOKEN = "revision-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEAD = ["http://127.0.0.1:9"]
LANES = {"fast": {"upstreams": DEAD, "models": ["small"]}, "slow": {"upstreams": DEAD, "models": ["big"]}}


def _shift(percent: int, revision: int | None) -> dict[str, Any]:
    put: dict[str, Any] = {"lanes": {"slow": {"shift_to": "fast", "shift_percent": percent}}}
    return put if revision is None else {**put, "revision": revision}


async def _admin(
    s: aiohttp.ClientSession, g: RunningGateway, method: str, put: Any = None
) -> tuple[int, dict[str, Any]]:
    async with s.request(method, f"{g.url}/admin/degrade", json=put, headers=AUTH) as r:
        return r.status, await r.json()


def _token(tmp_path: Path) -> str:
    path = tmp_path / "admin.token"
    path.write_text(TOKEN + "\n")
    return str(path)


async def test_a_replayed_older_put_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    async with gateway_server(LANES, admin_token_file=_token(tmp_path)) as g, aiohttp.ClientSession() as s:
        assert (await _admin(s, g, "PUT", _shift(50, 5)))[0] == 200
        status, held = await _admin(s, g, "PUT", _shift(100, 6))
        assert (status, held["version"], held["revision"]) == (200, 2, 6)

        status, refused = await _admin(s, g, "PUT", _shift(50, 5))  # the older state, sent again
        assert status == 409, refused
        assert refused["revision"] == 6  # what the sender lost to
        assert refused["error"]["param"] == "revision" and refused["error"]["code"] == 409
        assert refused["error"]["type"] == "ConflictError"  # what it is, as openai.ConflictError names it
        assert "revision 5 is older than the degrade state's revision 6" in refused["error"]["message"]
        _, after = await _admin(s, g, "GET")
        assert after == held  # the state, its version and its revision are as they were
        assert g.gw.stats.degrade_refused["stale_revision"] == 1

        status, again = await _admin(s, g, "PUT", _shift(100, 6))  # a reconcile's re-send
        assert (status, again["version"], again["revision"]) == (200, 2, 6)
        status, manual = await _admin(s, g, "PUT", _shift(25, None))  # an operator's PUT: no revision
        assert (status, manual["version"], manual["revision"]) == (200, 3, None)
        assert (await _admin(s, g, "PUT", _shift(50, 1)))[0] == 200  # after it, any revision is taken


def _controller(state_dir: Path, url: str) -> tuple[DegradeService, GatewayAdapter, Store]:
    store = Store(state_dir)
    adapter = GatewayAdapter(url, TOKEN, retry=Retry(attempts=1))
    metrics = DegradeMetrics(CollectorRegistry(), [adapter.name])
    return DegradeService(DEFAULT_POLICY, store, [adapter], metrics), adapter, store


async def test_the_controllers_reconcile_survives_its_restart_and_a_stale_apply_is_refused(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    firing = parse_notification(encode(body(alert("firing", starts=time.time() - 5))))
    async with gateway_server(LANES, admin_token_file=_token(tmp_path)) as g, aiohttp.ClientSession() as s:
        service, adapter, store = _controller(state_dir, g.url)
        handled = await service.handle(firing)
        assert handled.changed and await service.reconcile()
        _, held = await _admin(s, g, "GET")
        assert held["revision"] == handled.revision >= 1 and held["lanes"]["slow"]["shift_to"] == "fast"
        await adapter.shutdown()
        store.close()

        service, adapter, store = _controller(state_dir, g.url)  # the controller restarted
        assert service.revision == handled.revision  # read back from its state dir, not from 0
        assert await service.reconcile()  # the same revision again: taken
        _, after = await _admin(s, g, "GET")
        assert (after["lanes"], after["version"], after["revision"]) == (
            held["lanes"],
            held["version"],
            handled.revision,
        )
        with pytest.raises(AdapterError, match="HTTP 409") as info:
            await adapter.apply({}, handled.revision - 1)  # a late retry of an older state
        assert not info.value.retryable
        assert (await _admin(s, g, "GET"))[1] == after
        await adapter.shutdown()
        store.close()
