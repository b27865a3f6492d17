from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.config import ConfigError, load_config


def test_defaults_need_no_file() -> None:
    cfg = load_config(None)
    assert [c.name for c in cfg.probe.classes] == ["short", "summary", "story"]
    assert cfg.targets == []


def test_yaml_and_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("probe:\n  interval_s: 3\nscrape:\n  interval_s: 7\n")
    monkeypatch.setenv("LANEWATCH__PROBE__INTERVAL_S", "1.5")
    cfg = load_config(f)
    assert cfg.probe.interval_s == 1.5  # environment wins
    assert cfg.scrape.interval_s == 7


def test_every_error_named_with_path_and_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "probe:\n  interval_s: -1\ntargets:\n  - name: a\n    url: ftp://x\n    model: m\nbogus: 1\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(f)
    found = {(i.path, i.line) for i in info.value.issues}
    assert ("probe.interval_s", 2) in found
    assert ("targets.0.url", 5) in found
    assert ("bogus", 7) in found


def test_yaml_syntax_error_has_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("probe:\n  interval_s: [1,\n")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    assert info.value.issues[0].line is not None


def test_unknown_class_on_target_rejected(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("targets:\n  - {name: a, url: 'http://127.0.0.1:1', model: m, classes: [nope]}\n")
    with pytest.raises(ConfigError, match="unknown request classes"):
        load_config(f)


def test_cli_config_check(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("targets:\n  - {name: a, url: 'http://127.0.0.1:1', model: m}\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("probe:\n  concurrency: 0\n")
    runner = CliRunner()
    ok = runner.invoke(app, ["config", "check", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "1 targets" in ok.output
    res = runner.invoke(app, ["config", "check", str(bad)])
    assert res.exit_code == 1
    assert "probe.concurrency (line 2)" in res.output


def test_cli_version() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.startswith("lanewatch ")


def test_gateway_connection_limits_are_validated(tmp_path: Path) -> None:
    f = tmp_path / "gw.yaml"
    f.write_text("gateway:\n  head_timeout_s: 0\n  keepalive_timeout_s: -1\n  max_connections: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(f)
    found = {(i.path, i.line) for i in info.value.issues}
    assert found >= {
        ("gateway.head_timeout_s", 2),
        ("gateway.keepalive_timeout_s", 3),
        ("gateway.max_connections", 4),
    }
    f.write_text("gateway:\n  head_timeout_s: 2.5\n  max_connections: 64\n")
    gw = load_config(f).gateway
    assert (gw.head_timeout_s, gw.keepalive_timeout_s, gw.max_connections) == (2.5, 75.0, 64)
