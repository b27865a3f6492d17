"""The closed lane and class sets a service counts by come from its config and its SLO spec."""

from __future__ import annotations

from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec
from lanewatch.collector.collect.label_sets import closed_classes, closed_lanes
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.goodput import from_spec
from lanewatch.collector.record.timing import RequestTiming

GW = GatewayConfig.model_validate({"lanes": {"gold": {"upstreams": ["http://127.0.0.1:9"]}}})


def test_lanes_are_the_configs_and_the_specs_and_other() -> None:
    goodput = from_spec(load_spec(DEFAULT_SPEC))
    lanes = closed_lanes(ExportConfig(lanes=["extra"]), GW, ["probe-lane"], goodput)
    assert lanes == frozenset({"extra", "gold", "probe-lane", "fast", "slow", "other"})
    assert closed_lanes(ExportConfig(), GatewayConfig()) is None  # nothing named: open


def test_classes_are_the_configs_the_probes_and_the_gateways_unless_left_open() -> None:
    assert closed_classes(ExportConfig(), GW, ["short"]) == frozenset(
        {"interactive", "batch", "short", "other"}
    )
    assert closed_classes(ExportConfig(request_classes=None), GW) is None


def test_the_collector_counts_an_unknown_lane_and_class_as_other() -> None:
    cfg = LanewatchConfig.model_validate(
        {"targets": [], "gpu": {"enabled": False}, "otlp": {"enabled": False}, "scrape": {"enabled": False}}
    )
    svc = CollectorService.from_config(cfg, source_factory=None)  # the bundled SLO spec names the lanes
    record = RequestTiming(
        source="tap", target="gw", lane="sq1", request_class="sq2", model="m", started_at=1.7e9, status=200,
        ttfb_s=0.01, ttft_s=0.02, e2e_s=0.3, output_tokens=3,
    )  # fmt: skip
    svc.receive_records([record])
    page = svc.render_metrics().decode()
    assert 'lane="other",model="m",request_class="other"' in page and "sq1" not in page and "sq2" not in page
