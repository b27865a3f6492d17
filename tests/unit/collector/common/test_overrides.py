"""Flags laid over a config are validated again, and errors name the flag and the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.common.settings import Flag, OverrideError, override
from lanewatch.collector.config import LanewatchConfig, ServerConfig
from lanewatch.collector.gateway.settings import GatewayConfig

LANES = {"fast": {"upstreams": ["http://127.0.0.1:9"]}, "slow": {"upstreams": ["http://127.0.0.1:10"]}}


def test_a_valid_flag_replaces_the_field_and_keeps_the_rest() -> None:
    cfg = LanewatchConfig()
    out = override(cfg, {"server.port": Flag("--port", 9999), "probe.shard": Flag("--shard", "0/2")})
    assert (out.server.port, out.probe.shard, out.server.host) == (9999, "0/2", cfg.server.host)
    assert cfg.server.port != 9999  # the original is left alone


def test_an_invalid_flag_names_the_flag_and_the_field() -> None:
    with pytest.raises(OverrideError) as info:
        override(
            LanewatchConfig(), {"server.port": Flag("--port", 70000), "probe.shard": Flag("--shard", "x")}
        )
    assert [p.split(":")[0] for p in info.value.problems] == [
        "--port (server.port)",
        "--shard (probe.shard)",
    ]


def test_flags_go_through_field_normalisation() -> None:
    gw = GatewayConfig.model_validate({"lanes": LANES})
    out = override(gw, {"collector_url": Flag("--collector", "http://c:9464/v1/records")}, "gateway.")
    assert out.collector_url == "http://c:9464"
    with pytest.raises(OverrideError, match=r"--collector \(gateway.collector_url\): .*must start with http"):
        override(gw, {"collector_url": Flag("--collector", "c:9464")}, "gateway.")


def test_model_checks_run_again() -> None:
    gw = GatewayConfig.model_validate({"lanes": LANES})
    with pytest.raises(OverrideError, match="unknown lanes"):
        override(gw, {"default_lane": Flag("--default-lane", "mid")}, "gateway.")


def test_flags_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANEWATCH__SERVER__PORT", "1234")
    cfg = LanewatchConfig()
    assert cfg.server.port == 1234
    assert override(cfg, {"server.port": Flag("--port", 4321)}).server.port == 4321


def test_a_flag_for_no_section_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="--x: nope is not a field"):
        override(LanewatchConfig(), {"nope": Flag("--x", 1)})
    assert override(ServerConfig(), {}) == ServerConfig()


def test_collect_refuses_a_bad_shard_flag_naming_it(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("targets: []\n")
    result = CliRunner().invoke(app, ["collect", "-c", str(cfg), "--shard", "3/2"])
    assert result.exit_code == 2
    assert "--shard" in result.output


def test_gateway_refuses_a_bad_collector_flag_naming_it() -> None:
    result = CliRunner().invoke(
        app, ["gateway", "--upstream", "fast=http://127.0.0.1:9", "--collector", "127.0.0.1:9464"]
    )
    assert result.exit_code == 2
    assert "--collector (gateway.collector_url)" in result.output
