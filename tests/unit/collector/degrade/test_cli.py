from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.state import AuditEntry
from lanewatch.collector.degrade.store import Store
from tests.unit.collector.degrade.test_store import numbered_state

runner = CliRunner()


def test_serve_refuses_to_start_without_a_token(tmp_path: Path) -> None:
    done = runner.invoke(
        app, ["degrade", "serve", "--gateway", "http://127.0.0.1:9", "--state-dir", str(tmp_path)]
    )
    assert done.exit_code == 2
    assert "refusing to start without --token-file" in done.stderr
    assert not list(tmp_path.iterdir())  # refused before touching the state dir


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--insecure-dev"], "no adapter"),
        (
            ["--insecure-dev", "--adapter", "webhook"],
            "adapter 'webhook' needs 'url' (or the flat key webhook_url)",
        ),
        (["--insecure-dev", "--gateway", "ftp://x"], "--gateway: 'ftp://x' must start with http"),
        (
            ["--insecure-dev", "--adapter", "nope"],
            "--adapter (degrade.adapters.0): unknown adapter kind 'nope'",
        ),
        (["--insecure-dev", "--gateway", "http://127.0.0.1:9", "--min-hold-s", "-1"], "min_hold_s"),
        (["--token-file", "/nonexistent/token", "--adapter", "dry-run"], "token file /nonexistent/token"),
    ],
)
def test_serve_names_the_bad_setting(tmp_path: Path, args: list[str], message: str) -> None:
    done = runner.invoke(app, ["degrade", "serve", "--state-dir", str(tmp_path / "s"), *args])
    assert done.exit_code == 2 and message in done.stderr, done.output


def test_serve_rejects_a_bad_policy_file_with_its_line(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("lane_order: [fast, slow]\nshift_percents: [100, 50]\n")
    args = [
        "--insecure-dev",
        "--adapter",
        "dry-run",
        "--policy",
        str(policy),
        "--state-dir",
        str(tmp_path / "s"),
    ]
    done = runner.invoke(app, ["degrade", "serve", *args])
    assert done.exit_code == 2 and "shift_percents (line 2)" in done.stderr


def test_status_prints_state_and_recent_audit(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store.commit(
        numbered_state(1), [AuditEntry(1_800_000_000, "apply", "slow", "shift", {"to": "fast"})], 1.8e9
    )
    store.close()
    done = runner.invoke(app, ["degrade", "status", "--state-dir", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "lane slow: shift 100% to fast" in done.stdout
    assert "#1 r1 2027-01-15T08:00:00Z apply lane=slow action=shift" in done.stdout


def test_status_without_state_fails_clearly(tmp_path: Path) -> None:
    done = runner.invoke(app, ["degrade", "status", "--state-dir", str(tmp_path / "none")])
    assert done.exit_code == 1 and "no controller state" in done.stderr


def test_serve_reads_its_section_from_the_config_file(tmp_path: Path) -> None:
    """-c is the config file every command reads; its degrade section sets the controller."""
    policy = tmp_path / "p.yaml"
    policy.write_text("lane_order: [fast, slow]\nshift_percents: [100, 50]\n")
    cfg = tmp_path / "lanewatch.yaml"
    cfg.write_text(
        f"degrade:\n  insecure_dev: true\n  adapters: [dry-run]\n  policy_file: {policy}\n"
        f"  state_dir: {tmp_path / 's'}\n"
    )
    done = runner.invoke(app, ["degrade", "serve", "-c", str(cfg)])
    # the policy named by the file was loaded: its error (with its line) is the one reported
    assert done.exit_code == 2 and "shift_percents (line 2)" in done.stderr, done.output


def test_serve_names_a_bad_field_of_the_config_file_with_its_line(tmp_path: Path) -> None:
    cfg = tmp_path / "lanewatch.yaml"
    cfg.write_text("degrade:\n  tick_s: -1\n")
    done = runner.invoke(app, ["degrade", "serve", "-c", str(cfg)])
    assert done.exit_code == 2 and "degrade.tick_s (line 2)" in done.stderr, done.output


def test_serve_flags_win_over_the_file_and_name_themselves(tmp_path: Path) -> None:
    cfg = tmp_path / "lanewatch.yaml"
    cfg.write_text("degrade:\n  insecure_dev: true\n  gateway_url: http://127.0.0.1:9\n")
    done = runner.invoke(app, ["degrade", "serve", "-c", str(cfg), "--tick-s", "0"])
    assert done.exit_code == 2 and "--tick-s (degrade.tick_s)" in done.stderr, done.output
