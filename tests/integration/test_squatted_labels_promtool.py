"""After 10,000 client-chosen class names, a slow-lane outage still pages: a real gateway on 127.0.0.1
takes 10,000 slow-lane requests each naming its own class and model (hints trusted, the worst case:
the gateway counts unknown classes as `other`, but a lane without declared models passes any model
name, so the series budget fills), then the slow lane fails half its requests under new names, which
fold into `__overflow__` but keep their lane; what its /metrics then says, as series, pages through
the shipped rules in promtool.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.alerts.build import GENERATED_DIR
from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.gateway import GatewayServer
from lanewatch.collector.gateway.processes.serve import build_gateway
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.exporters import names
from tests.conftest import require_binary

from .gateway_harness import TRUST_LOOPBACK, chat_body, upstream_server

pytestmark = pytest.mark.integration

FLOOD = 10_000
OUTAGE = 300  # slow-lane requests, every other one failing (503 upstream)
WORKERS = 32
STEP_MIN = 30  # the outage's counts spread over this many minutes of promtool series
FAMILIES = (names.REQUESTS_TOTAL, names.REQUEST_ERRORS_TOTAL, names.SERIES_OVERFLOW_TOTAL)
Series = dict[str, float]


def counters(page: str) -> Series:
    """`name{labels}` -> value for the counters the availability and overflow rules read."""
    out: Series = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            if s.name in FAMILIES:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{labels}}}"] = s.value
    return out


async def send(
    url: str, n: int, headers_of: Callable[[int], dict[str, str]], model: str = "m{}"
) -> list[int]:
    """`n` requests through the gateway from WORKERS connections, the i-th asking for model
    `model.format(i)`; the statuses."""
    statuses: list[int] = []

    async def worker(k: int, s: aiohttp.ClientSession) -> None:
        for i in range(k, n, WORKERS):
            body = chat_body(max_tokens=1, stream=False, model=model.format(i))
            async with s.post(f"{url}/v1/chat/completions", json=body, headers=headers_of(i)) as r:
                await r.read()
                statuses.append(r.status)

    async with aiohttp.ClientSession() as s:
        await asyncio.wait_for(asyncio.gather(*(worker(k, s) for k in range(WORKERS))), 300)
    return statuses


def promtool_test(before: Series, after: Series) -> dict[str, Any]:
    """A promtool test over the series that changed: from `before`, growing evenly to `after` in
    STEP_MIN minutes and on; the slow lane's availability page and the overflow alert expected."""
    inputs = [
        {
            "series": key,
            "values": f"{before.get(key, 0.0):g}+{(value - before.get(key, 0.0)) / STEP_MIN:g}x60",
        }
        for key, value in sorted(after.items())
        if value != before.get(key, 0.0)
    ]
    page = 'ALERTS{alertname="LanewatchAvailabilityBurnRate",alertstate="firing",severity="page"}'
    overflow = (
        'min(ALERTS{alertname="LanewatchSeriesOverflow",alertstate="firing",'
        'family="lanewatch_requests_total"})'
    )
    slow_page = (
        'ALERTS{alertname="LanewatchAvailabilityBurnRate",alertstate="firing",'
        'lane="slow",severity="page",slo="availability"}'
    )
    return {
        "rule_files": [str(GENERATED_DIR / "lanewatch-rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {"expr": page, "eval_time": "20m", "exp_samples": [{"labels": slow_page, "value": 1}]},
                    {"expr": overflow, "eval_time": "20m", "exp_samples": [{"labels": "{}", "value": 1}]},
                ],
            }
        ],
    }


def hint(cls: str, lane: str, status: int = 200) -> dict[str, str]:
    """A trusted client's headers: its class and lane, and the status the test upstream answers."""
    return {"x-lanewatch-class": cls, "x-lanewatch-lane": lane, "x-test-status": str(status)}


async def flood_then_outage() -> tuple[str, str]:
    """The gateway's /metrics after the flood of class names, and after the slow lane's outage."""
    async with upstream_server(first_ms=0, gap_ms=0) as (_up, up_url):
        lanes = {"fast": {"upstreams": [up_url]}, "slow": {"upstreams": [up_url]}}
        cfg = GatewayConfig.model_validate({"lanes": lanes, "hints": TRUST_LOOPBACK})
        built = build_gateway(cfg, ExportConfig(), None)
        gw = built.gateway
        assert gw.metrics_text is not None
        server = GatewayServer(gw)
        url = f"http://127.0.0.1:{await server.start('127.0.0.1', 0)}"
        try:
            flood = await send(url, FLOOD, lambda i: hint(f"sq{i}", "slow"))
            fresh = await send(url, 10, lambda i: hint("batch", "fast"), model="fresh")
            before = gw.metrics_text()[0].decode()
            outage = await send(
                url, OUTAGE, lambda i: hint(f"late{i}", "slow", 503 if i % 2 else 200), "late{}"
            )
            after = gw.metrics_text()[0].decode()
        finally:
            await server.shutdown()
    assert flood.count(200) == FLOOD and fresh.count(200) == 10
    assert sorted(outage) == [200] * (OUTAGE // 2) + [503] * (OUTAGE // 2)
    return before, after


def test_a_slow_lane_outage_pages_after_10000_client_chosen_class_names(tmp_path: Path) -> None:
    promtool = require_binary("promtool")
    before, after = asyncio.run(flood_then_outage())
    assert 'lane="__overflow__"' not in after  # the lane never folds
    folded = (
        'lane="slow",model="__overflow__",request_class="__overflow__",source="tap",target="__overflow__"'
    )
    assert f'{names.REQUEST_ERRORS_TOTAL}{{error_kind="http_5xx",{folded}}} {OUTAGE // 2}.0' in after
    # the fast lane kept its reserve: its new class has its own series (its model, past the
    # 200 values export.max_label_values keeps of a label, is __overflow__)
    assert 'lane="fast",model="__overflow__",request_class="batch",source="tap",target="127.0.0.1:' in after
    assert "sq1" not in after and "late1" not in after  # class names outside the gateway's: other
    test_file = tmp_path / "squatted.yml"
    test_file.write_text(yaml.safe_dump(promtool_test(counters(before), counters(after))))
    done = subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
