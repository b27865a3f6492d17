from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from lanewatch.collector.gateway.stats import GatewayStats
from lanewatch.collector.gateway.upstream.pool import LanePool
from lanewatch.exporters.gateway import GatewayCollector


def test_gateway_metrics_text() -> None:
    pool = LanePool.of("fast", ["http://127.0.0.1:8001"])
    pool.upstreams[0].outstanding = 2
    stats = GatewayStats(pools=[pool], degrade_version=3)
    stats.requests[("slow", "fast", "shift")] += 4
    stats.shed[("slow", "batch")] += 1
    stats.degrade_applied[("slow", "shift")] += 4
    stats.upstream_errors[("fast", "127.0.0.1:8001", "connect_refused")] += 2
    for status in (400, 400, 408):
        stats.count_refused(status)
    stats.degrade_refused["stale_revision"] += 2
    stats.lane_models = (("fast", "small", "learned"), ("slow", "big", "declared"))
    stats.model_discovery_failures["fast"] += 1
    stats.model_collisions["fast"] += 1
    registry = CollectorRegistry()
    registry.register(GatewayCollector(stats))
    text = generate_latest(registry).decode()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        'lanewatch_gateway_requests_total{degraded="shift",lane="slow",served_lane="fast"} 4.0',
        'lanewatch_gateway_shed_total{lane="slow",request_class="batch"} 1.0',
        'lanewatch_gateway_degrade_applied_total{action="shift",lane="slow"} 4.0',
        "lanewatch_gateway_upstream_errors_total"
        '{error_kind="connect_refused",lane="fast",upstream="127.0.0.1:8001"} 2.0',
        'lanewatch_gateway_refused_requests_total{code="400"} 2.0',
        'lanewatch_gateway_refused_requests_total{code="408"} 1.0',
        'lanewatch_gateway_inflight_requests{lane="fast",upstream="127.0.0.1:8001"} 2.0',
        'lanewatch_gateway_upstream_healthy{lane="fast",upstream="127.0.0.1:8001"} 1.0',
        "lanewatch_gateway_degrade_state_version 3.0",
        'lanewatch_gateway_degrade_refused_total{reason="invalid"} 0.0',  # every reason from the start
        'lanewatch_gateway_degrade_refused_total{reason="models_unknown"} 0.0',
        'lanewatch_gateway_degrade_refused_total{reason="stale_revision"} 2.0',
        'lanewatch_gateway_lane_model_info{lane="fast",model="small",source="learned"} 1.0',
        'lanewatch_gateway_lane_model_info{lane="slow",model="big",source="declared"} 1.0',
        'lanewatch_gateway_model_discovery_failures_total{lane="fast"} 1.0',
        'lanewatch_gateway_model_collisions_total{lane="fast"} 1.0',
    ]
    assert "# TYPE lanewatch_gateway_requests_total counter" in text
