"""The envoy and nginx adapters against the real routers, two test upstreams behind them.

Shares are measured at the upstreams (the requests each one served). Every wait is bounded,
and the bounds are the behaviour promised: a shift takes hold within 2 s of the apply.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import aiohttp
import pytest
import yaml
from prometheus_client import CollectorRegistry

from lanewatch.collector.degrade.adapters import Adapter, AdapterError, EnvoySettings, NginxSettings
from lanewatch.collector.degrade.applier import FAILURE_REASONS as REASONS
from lanewatch.collector.degrade.metrics import DegradeMetrics
from lanewatch.collector.degrade.policy import DEFAULT_POLICY
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.store import Store
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.integration.gateway_harness import chat_body, read_events
from tests.sse_upstream import SseUpstream

from .traffic import BATCH, KINDS, SHIFTED, moved_within, router_setup, send, share_at_fast, share_from

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_shift_moves_the_slow_lane_within_2_s_and_a_restore_moves_it_back(
    kind: str, tmp_path: Path
) -> None:
    async with router_setup(kind, tmp_path) as (ups, router, adapter, s):
        await adapter.apply({}, 1)
        assert await share_at_fast(s, router, ups, 20) == 0.0
        t0 = time.monotonic()
        await adapter.apply(SHIFTED, 2)
        took = await moved_within(s, router, ups, t0, 1.0)
        assert await share_from(s, router, ups, t0 + 2.0) >= 0.95
        assert await _held(adapter) == SHIFTED
        t0 = time.monotonic()
        await adapter.apply({}, 3)
        back = await moved_within(s, router, ups, t0, 0.0)
        assert await share_from(s, router, ups, t0 + 2.0) <= 0.05
        assert await _held(adapter) == {}
        print(f"{kind}: shift took hold in {took:.2f} s, restore in {back:.2f} s")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_stream_in_flight_across_the_change_completes_intact(kind: str, tmp_path: Path) -> None:
    async with router_setup(kind, tmp_path) as (ups, router, adapter, s):
        await adapter.apply({}, 1)
        h = {"x-lanewatch-lane": "slow", "x-test-gap-ms": "50"}
        async with s.post(f"{router.url}/v1/chat/completions", json=chat_body(max_tokens=30), headers=h) as r:
            assert r.status == 200
            first = await r.content.readuntil(b"\n\n")
            t0 = time.monotonic()
            await adapter.apply(SHIFTED, 2)  # a route swap / a reload while the stream runs
            await moved_within(s, router, ups, t0, 1.0)
            rest = b"".join([e for _, e in await read_events(r)])
        text = (first + rest).decode()
        assert all(f'"content":"t{i} "' in text for i in range(30)), text[-500:]
        assert text.rstrip().endswith("data: [DONE]")
        assert [
            up.last().finished for up in ups.values() if up.requests and up.last().body["max_tokens"] == 30
        ] == [True]


@pytest.mark.parametrize("kind", KINDS)
async def test_shed_gives_429_to_batch_only(kind: str, tmp_path: Path) -> None:
    async with router_setup(kind, tmp_path) as (_ups, router, adapter, s):
        await adapter.apply({"fast": LaneDegrade(shed_classes=("batch",))}, 1)
        h = {"x-lanewatch-lane": "fast", **BATCH}
        async with s.post(f"{router.url}/v1/chat/completions", json=chat_body(stream=False), headers=h) as r:
            assert (r.status, r.headers["retry-after"]) == (429, "30")
            assert (await r.json())["error"]["code"] == 429
        assert await send(s, router.url, "fast") == 200
        assert await send(s, router.url, "fast", {"x-tenant-tier": "interactive"}) == 200
        # a client's own class hint decides nothing: the template's rule does
        assert await send(s, router.url, "fast", {"x-lanewatch-class": "batch"}) == 200
        assert await send(s, router.url, "slow", BATCH) == 200  # the slow lane sheds nothing
        assert await _held(adapter) == {"fast": LaneDegrade(shed_classes=("batch",))}
        await adapter.apply({}, 2)
        assert await send(s, router.url, "fast", BATCH) == 200


# Both lanes alerting, as the default policy answers it: slow shifts to fast, fast sheds batch.
BOTH_ALERT = {
    "slow": LaneDegrade(shift_to="fast", shift_percent=100),
    "fast": LaneDegrade(shed_classes=("batch",)),
}
Answer = tuple[int, dict[str, str | None], bytes]


async def _answer(s: aiohttp.ClientSession, url: str, lane: str, headers: dict[str, str]) -> Answer:
    h = {"x-lanewatch-lane": lane, **headers}
    async with s.post(
        f"{url}/v1/chat/completions", json=chat_body(max_tokens=1, stream=False), headers=h
    ) as r:
        keys = ("retry-after", "content-type", "x-lanewatch-degraded")
        return r.status, {k: r.headers.get(k) for k in keys}, await r.read()


def _served(ups: dict[str, SseUpstream]) -> dict[str, int]:
    return {lane: len(up.requests) for lane, up in ups.items()}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_request_shifted_to_a_lane_obeys_that_lane_shed(kind: str, tmp_path: Path) -> None:
    async with router_setup(kind, tmp_path) as (ups, router, adapter, s):
        await adapter.apply(BOTH_ALERT, 1)
        own = await _answer(s, router.url, "fast", BATCH)  # the fast lane's own shed answer
        assert own[0] == 429 and own[1]["retry-after"] == "30"
        assert own[1]["x-lanewatch-degraded"] == "shed" and json.loads(own[2])["error"]["code"] == 429
        before = _served(ups)
        shifted = [await _answer(s, router.url, "slow", BATCH) for _ in range(10)]
        assert shifted == [own] * 10  # answered as fast answers its own batch requests
        assert _served(ups) == before  # none reached an upstream
        assert await share_at_fast(s, router, ups, 10) == 1.0  # slow's other requests still shift
        assert await _held(adapter) == BOTH_ALERT


@pytest.mark.parametrize("kind", KINDS)
async def test_under_a_half_shift_no_request_of_a_class_the_target_sheds_reaches_it(
    kind: str, tmp_path: Path
) -> None:
    lanes = {**BOTH_ALERT, "slow": LaneDegrade(shift_to="fast", shift_percent=50)}
    async with router_setup(kind, tmp_path) as (ups, router, adapter, s):
        await adapter.apply(lanes, 1)
        before = _served(ups)
        statuses = [(await _answer(s, router.url, "slow", BATCH))[0] for _ in range(60)]
        shed = statuses.count(429)
        # The shifted half is shed, the rest stays on slow: 60 draws at 50 %, 10..50 is 5 sd wide
        assert 10 <= shed <= 50 and statuses.count(200) == 60 - shed
        after = _served(ups)
        assert (after["fast"] - before["fast"], after["slow"] - before["slow"]) == (0, 60 - shed)
        assert await _held(adapter) == lanes


# Lanes by path: /slow/... is the slow lane (its prefix stripped for the upstream), the rest fast.
# The class's rule names the whole request path on either lane.
BY_PATH = """\
classes:
  batch:
    safe_regex: {regex: "(/slow)?/v1/completions"}
route_config:
  name: lanes
  virtual_hosts:
    - name: llm
      domains: ["*"]
      routes:
        - match: {prefix: /slow/}
          metadata: {filter_metadata: {lanewatch: {lane: slow}}}
          route: {cluster: slow, timeout: 0s, prefix_rewrite: /}
        - match: {prefix: /}
          metadata: {filter_metadata: {lanewatch: {lane: fast}}}
          route: {cluster: fast, timeout: 0s}
"""


async def _status(s: aiohttp.ClientSession, url: str) -> int:
    async with s.post(url, json=chat_body(max_tokens=1, stream=False)) as r:
        await r.read()
        return r.status


@pytest.mark.parametrize("shed", ["slow", "fast"])
async def test_with_lanes_by_path_a_shed_refuses_the_class_on_its_own_lane_only(
    shed: str, tmp_path: Path
) -> None:
    async with router_setup("envoy", tmp_path) as (ups, router, adapter, s):
        settings = router.settings
        assert isinstance(settings, EnvoySettings)
        settings.route_template.write_text(BY_PATH)
        await adapter.apply({shed: LaneDegrade(shed_classes=("batch",))}, 1)
        batch = {"slow": "/slow/v1/completions", "fast": "/v1/completions"}
        before = _served(ups)
        got = {lane: await _status(s, router.url + path) for lane, path in batch.items()}
        assert got == {lane: 429 if lane == shed else 200 for lane in batch}
        assert await _status(s, router.url + batch[shed] + "?n=1") == 429  # a query does not hide the path
        other = "fast" if shed == "slow" else "slow"
        after = _served(ups)
        assert (after[other] - before[other], after[shed] - before[shed]) == (1, 0)
        chat = {"slow": "/slow/v1/chat/completions", "fast": "/v1/chat/completions"}
        assert [await _status(s, router.url + chat[lane]) for lane in ("slow", "fast")] == [200, 200]
        assert _served(ups)[shed] - after[shed] == 1  # the shed lane serves its other requests
        assert await _held(adapter) == {shed: LaneDegrade(shed_classes=("batch",))}


async def test_envoy_routes_naming_a_cluster_only_in_mirrors_validate_and_apply(tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path) as (ups, router, adapter, s):
        settings = router.settings
        assert isinstance(settings, EnvoySettings)
        # A cluster named only by mirrors (on a lane's route and on the virtual host): lanewatch_collector
        # is in the shipped bootstrap, and nothing is mirrored (0 %).
        data = yaml.safe_load(settings.route_template.read_text())
        host = data["route_config"]["virtual_hosts"][0]
        never = {"default_value": {"numerator": 0}}
        host["request_mirror_policies"] = [{"cluster": "lanewatch_collector", "runtime_fraction": never}]
        host["routes"][1]["route"]["request_mirror_policies"] = [
            {"cluster": "lanewatch_collector", "runtime_fraction": never}
        ]
        settings.route_template.write_text(yaml.safe_dump(data))
        await adapter.apply(SHIFTED, 1)
        assert await share_at_fast(s, router, ups, 10) == 1.0
        await adapter.apply({}, 2)  # the restore validates too
        assert await share_at_fast(s, router, ups, 10) == 0.0
        assert "request_mirror_policies" in settings.route_file.read_text()


async def _held(adapter: Adapter) -> dict[str, LaneDegrade]:
    view = await adapter.read_back()
    assert view is not None
    return view.lanes


def _failures(metrics: DegradeMetrics, name: str) -> float:
    counter = "lanewatch_degrade_adapter_failures_total"
    return sum(
        metrics.registry.get_sample_value(counter, {"adapter": name, "reason": r}) or 0 for r in REASONS
    )


async def _reconcile_once(tmp_path: Path, adapter: Adapter) -> tuple[bool, DegradeMetrics, Store]:
    store = Store(tmp_path / "state")
    metrics = DegradeMetrics(CollectorRegistry(), [adapter.name])
    ok = await DegradeService(DEFAULT_POLICY, store, [adapter], metrics).reconcile()
    return ok, metrics, store


@pytest.mark.parametrize("validate", [True, False])
async def test_envoy_routes_that_do_not_validate_leave_the_running_config(
    validate: bool, tmp_path: Path
) -> None:
    async with router_setup("envoy", tmp_path, validate_with_envoy=validate) as (ups, router, adapter, s):
        settings = router.settings
        assert isinstance(settings, EnvoySettings)
        await adapter.apply(SHIFTED, 1)
        good = settings.route_file.read_text()
        template = settings.route_template
        bad_route = "        - match: {safe_regex: {regex: '('}}\n          route: {cluster: fast}\n"
        template.write_text(template.read_text().replace("      routes:\n", "      routes:\n" + bad_route, 1))
        with pytest.raises(AdapterError) as caught:
            await adapter.apply({}, 2)
        reason = "do not validate (envoy --mode validate)" if validate else "update_rejected"
        assert reason in str(caught.value) and not caught.value.retryable
        assert settings.route_file.read_text() == good
        assert await share_at_fast(s, router, ups, 20) == 1.0  # Envoy still holds the shift
        ok, metrics, store = await _reconcile_once(tmp_path, adapter)
        assert not ok and _failures(metrics, adapter.name) == 1
        [(_seq, _rev, entry)] = [e for e in store.recent(10) if e[2].event == "adapter_failed"]
        assert reason in entry.detail["error"]


async def test_an_nginx_include_the_check_refuses_is_put_back_and_not_reloaded(tmp_path: Path) -> None:
    async with router_setup("nginx", tmp_path) as (ups, router, adapter, s):
        await adapter.apply(SHIFTED, 1)
        assert isinstance(router.settings, NginxSettings)
        include = router.settings.include_file
        good = include.read_text()
        broken = router.settings.model_copy(update={"lane_variable": "$no_such_variable"}).build()
        with pytest.raises(AdapterError, match="refused the rendered include") as caught:
            await broken.apply({}, 2)
        assert "no_such_variable" in str(caught.value) and "previous include is back" in str(caught.value)
        assert include.read_text() == good
        assert await share_at_fast(s, router, ups, 20) == 1.0  # nginx still holds the shift
        ok, metrics, _store = await _reconcile_once(tmp_path, broken)
        assert not ok and _failures(metrics, broken.name) == 1
        assert include.read_text() == good
