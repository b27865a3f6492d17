"""deploy/envoy/access-log.yaml: Envoy 1.40 takes it, and it sends every attribute the mapping reads."""

from __future__ import annotations

from typing import Any

import yaml

from lanewatch.collector.collect.envoy_log import DURATION_KEYS
from tests.envoy import ACCESS_LOG_BOOTSTRAP, access_log_bootstrap, validate

# The attributes collector/collect/envoy_log.py reads (durations as `<key>_us` or `<key>_ms`).
READ = {
    "upstream_cluster", "upstream_host", "response_code", "response_flags", "request_id",
    "traceparent", "request_class", "model", "route_name", "path", "content_type",
}  # fmt: skip


def attributes(config: dict[str, Any]) -> dict[str, str]:
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    [logger] = hcm["access_log"]
    assert logger["name"] == "envoy.access_loggers.open_telemetry"
    values = logger["typed_config"]["attributes"]["values"]
    return {v["key"]: v["value"]["string_value"] for v in values}


def test_envoy_validates_the_shipped_bootstrap_and_a_rendered_one(tmp_path: Any) -> None:
    shipped = validate(ACCESS_LOG_BOOTSTRAP)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert "Deprecated" not in shipped.stdout + shipped.stderr
    config, _, _ = access_log_bootstrap({"fast": 18001, "slow": 18002}, 14317, token="t0ken")
    path = tmp_path / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    rendered = validate(path)
    assert rendered.returncode == 0, rendered.stdout + rendered.stderr


def test_envoy_rejects_a_broken_bootstrap(tmp_path: Any) -> None:
    text, field = ACCESS_LOG_BOOTSTRAP.read_text(), "cluster: lanewatch_collector"
    assert field in text  # the field this misspells
    path = tmp_path / "envoy.yaml"
    path.write_text(text.replace(field, "clustr: lanewatch_collector"))
    assert validate(path).returncode != 0  # the check can fail


def test_the_bootstrap_logs_what_the_mapping_reads_with_ttft_from_the_bodys_end() -> None:
    attrs = attributes(yaml.safe_load(ACCESS_LOG_BOOTSTRAP.read_text()))
    assert set(attrs) >= READ
    for key in (*DURATION_KEYS, "upload"):
        assert f"{key}_us" in attrs or f"{key}_ms" in attrs
    # the evidence contract (docs/slo.md): the TTFT clock starts when the body has fully arrived
    assert attrs["ttft_us"] == "%COMMON_DURATION(DS_RX_END:US_RX_BODY_BEG:us)%"
    assert attrs["upload_us"] == "%COMMON_DURATION(DS_RX_BEG:DS_RX_END:us)%"
    assert attrs["content_type"] == "%RESP(CONTENT-TYPE)%"
    assert attrs["duration_ms"] == "%DURATION%"
    assert attrs["traceparent"] == "%REQ(TRACEPARENT)%"
    assert attrs["upstream_cluster"] == "%UPSTREAM_CLUSTER%"


def test_admin_listens_on_loopback_only() -> None:
    config = yaml.safe_load(ACCESS_LOG_BOOTSTRAP.read_text())
    assert config["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"


def test_trace_sampling_does_not_read_the_clients_request_id() -> None:
    # Envoy's default takes its sampling decision from the x-request-id UUID: a client's id that is
    # not one makes it send `traceparent ...-00` upstream, vLLM records no span, and nothing joins.
    config = yaml.safe_load(ACCESS_LOG_BOOTSTRAP.read_text())
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["request_id_extension"]["typed_config"]["use_request_id_for_trace_sampling"] is False
    assert hcm["tracing"]["random_sampling"]["value"] == 100
