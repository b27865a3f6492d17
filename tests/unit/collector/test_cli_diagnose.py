"""`lanewatch diagnose` on records files: ranked text, versioned JSON, exit 0 / 1 / 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.diagnose import CHECKS
from lanewatch.collector.record.files import record_line
from tests.servers import lanewatch_command
from tests.unit.collector.diagnose.build import Shape, records


def _file(folder: Path, slow: Shape) -> Path:
    path = folder / "records.jsonl"
    rows = records(slow, lane="slow") + records(Shape(), lane="fast")
    path.write_text("".join(record_line(r) for r in rows), encoding="utf-8")
    return path


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["diagnose", *args])
    return res.exit_code, res.stdout, res.stderr


def test_a_queue_bound_lane_is_found_ranked_with_its_evidence_and_exit_1(tmp_path: Path) -> None:
    code, out, err = _invoke(str(_file(tmp_path, Shape(queue=2.5))))
    assert (code, err) == (1, "")
    assert out.startswith(f"diagnosis: 1 finding from records {tmp_path / 'records.jsonl'}\n")
    assert "slow lane: 1 found, top queue/unsplit" in out
    assert "1. queue/unsplit: queue-bound, cause unsplit (explains 98% of TTFT)" in out
    assert "ttft p99 (SLO): 2.556 > 2  <-" in out  # the default spec's slow-lane TTFT SLO
    assert "would split or measure it: vllm:num_requests_waiting" in out
    assert "fast lane: no finding" in out


def test_healthy_lanes_exit_0(tmp_path: Path) -> None:
    code, out, _ = _invoke(str(_file(tmp_path, Shape())))
    assert code == 0
    assert out.startswith("diagnosis: 0 findings")


def test_json_is_versioned_and_lists_every_check_per_lane(tmp_path: Path) -> None:
    code, out, _ = _invoke(str(_file(tmp_path, Shape(queue=2.5))), "--json", "--lane", "slow")
    doc = json.loads(out)
    assert code == 1
    assert doc["schema"] == "lanewatch.diagnose/v1" and doc["found"] == 1 and doc["window"] is None
    (lane,) = doc["lanes"]
    assert lane["lane"] == "slow"
    assert sorted(f["check"] for f in lane["findings"]) == sorted(c.id for c in CHECKS)
    top = lane["findings"][0]
    assert top["check"] == "queue/unsplit" and top["verdict"] == "finding"
    assert top["explains"]["of"] == "ttft" and 0.97 < top["explains"]["share"] < 0.99
    assert {"signal", "value", "threshold", "comparison", "source", "breached"} <= set(top["evidence"][0])


def test_bad_line_exits_2_naming_the_line(tmp_path: Path) -> None:
    path = _file(tmp_path, Shape())
    path.write_text(path.read_text() + '{"source": "probe", "lane": 3}\n', encoding="utf-8")
    code, out, err = _invoke(str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"lanewatch diagnose: {path}: line 241: field 'lane': expected str, got int")


def test_bad_flags_exit_2_naming_the_flag(tmp_path: Path) -> None:
    path = _file(tmp_path, Shape())
    for args, flag in (
        ((str(path), "--lane", "nosuch"), "--lane"),
        ((str(path), "--prometheus", "127.0.0.1:9090"), "--prometheus"),
        (("--prometheus", "http://127.0.0.1:9090", "--window", "ten"), "--window"),
        ((str(path), "--slo-spec", str(tmp_path / "none.yaml")), "--slo-spec"),
        ((), "--prometheus"),
    ):
        code, _, err = _invoke(*args)
        assert code == 2, args
        assert flag in err, (args, err)


def test_the_installed_command_runs_as_a_process(tmp_path: Path) -> None:
    path = _file(tmp_path, Shape(queue=2.5))
    done = subprocess.run(
        [*lanewatch_command(), "diagnose", str(path), "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["lanes"][1]["findings"][0]["check"] == "queue/unsplit"


def test_the_example_in_the_docs_is_what_the_command_prints() -> None:
    from tests.unit.collector.diagnose import example

    page = example.PAGE.read_text(encoding="utf-8")
    assert example.refresh(page) == page, "run: .venv/bin/python -m tests.unit.collector.diagnose.example"


def test_thresholds_come_from_the_config_files_diagnose_section(tmp_path: Path) -> None:
    records = str(_file(tmp_path, Shape(queue=2.5)))
    cfg = tmp_path / "lanewatch.yaml"
    cfg.write_text("diagnose:\n  queue_share: 0.99\n", encoding="utf-8")
    assert _invoke(records)[0] == 1
    code, out, _ = _invoke(records, "-c", str(cfg))
    assert code == 0 and "0 findings" in out  # 98% of TTFT is under a 99% bar
    cfg.write_text("diagnose:\n  queue_shares: 0.5\n", encoding="utf-8")
    code, _, err = _invoke(records, "-c", str(cfg))
    assert code == 2 and "diagnose.queue_shares" in err and "line 2" in err


def test_check_and_skip_choose_the_checks_reported(tmp_path: Path) -> None:
    records = str(_file(tmp_path, Shape(queue=2.5)))
    chosen = [c.id for c in CHECKS][:2]
    code, out, _ = _invoke(records, "--json", "--lane", "slow", *(f"--check={i}" for i in chosen))
    assert sorted(f["check"] for f in json.loads(out)["lanes"][0]["findings"]) == sorted(chosen)
    code, out, _ = _invoke(records, "--json", "--lane", "slow", "--skip", "queue/unsplit")
    assert code == 0 and json.loads(out)["found"] == 0  # the one finding was queue/unsplit's
    reported = sorted(f["check"] for f in json.loads(out)["lanes"][0]["findings"])
    assert reported == sorted(c.id for c in CHECKS if c.id != "queue/unsplit")


def test_an_unknown_check_id_exits_2_naming_it_and_where_it_was_given(tmp_path: Path) -> None:
    records = str(_file(tmp_path, Shape(queue=2.5)))
    for args, said in (
        (("--check", "queue/nosuch"), "--check: no check 'queue/nosuch'"),
        (("--skip", "nosuch"), "--skip: no check 'nosuch'"),
    ):
        code, out, err = _invoke(records, *args)
        assert (code, out) == (2, ""), args
        assert err.startswith(f"lanewatch diagnose: {said}") and "queue/kv-memory" in err, err
    cfg = tmp_path / "lanewatch.yaml"
    cfg.write_text("diagnose:\n  skip: [queue/nosuch]\n", encoding="utf-8")
    code, _, err = _invoke(records, "-c", str(cfg))
    assert code == 2 and "diagnose.skip: no check 'queue/nosuch'" in err, err
    cfg.write_text("diagnose:\n  skip: [queue/unsplit]\n", encoding="utf-8")
    code, out, _ = _invoke(records, "-c", str(cfg))
    assert code == 0 and "queue/unsplit" not in out
    code, out, _ = _invoke(records, "-c", str(cfg), "--skip", "latency/flat")  # the flag replaces the list
    assert code == 1 and "top queue/unsplit" in out and "latency/flat" not in out


def test_an_environment_override_sets_a_threshold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANEWATCH__DIAGNOSE__QUEUE_SHARE", "0.99")
    assert _invoke(str(_file(tmp_path, Shape(queue=2.5))))[0] == 0


def test_an_environment_override_in_lower_case_still_sets_a_threshold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("lanewatch__diagnose__queue_share", "0.99")  # the config reads names in any case
    assert _invoke(str(_file(tmp_path, Shape(queue=2.5))))[0] == 0


def test_the_cli_spells_the_config_prefix_as_the_config_does() -> None:
    from lanewatch.collector.cli import diagnose as diagnose_cli
    from lanewatch.collector.config import ENV_PREFIX

    assert diagnose_cli.ENV_PREFIX == ENV_PREFIX


# What a records-file diagnosis must not load: the config model and its adapters, HTTP clients, servers.
HEAVY = (
    "lanewatch.collector.config",
    "pydantic_settings",
    "httpx",
    "prometheus_client",
    "fastapi",
    "asyncio",
)
PROBE = """
import sys
from lanewatch.collector.cli import main
sys.argv = ["lanewatch", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(",".join(name for name in {heavy!r} if name in sys.modules), file=sys.stderr)
"""


def test_a_records_file_diagnosis_loads_no_config_http_or_server_module(tmp_path: Path) -> None:
    path = _file(tmp_path, Shape(queue=2.5))
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("LANEWATCH__")}
    command = [sys.executable, "-c", PROBE.format(heavy=HEAVY)]
    done = subprocess.run(
        [*command, "diagnose", str(path), "--json"], capture_output=True, text=True, timeout=60, env=env
    )
    assert json.loads(done.stdout)["lanes"][1]["findings"][0]["check"] == "queue/unsplit"
    assert done.stderr.strip().splitlines()[-1:] in ([], [""])
    # with a config file the config loads (the probe sees it: the test can fail)
    cfg = tmp_path / "lanewatch.yaml"
    cfg.write_text("diagnose:\n  queue_share: 0.5\n", encoding="utf-8")
    done = subprocess.run(
        [*command, "diagnose", str(path), "-c", str(cfg)], capture_output=True, text=True, timeout=60, env=env
    )
    assert "lanewatch.collector.config" in done.stderr.strip().splitlines()[-1]


def test_help_lists_every_command() -> None:
    out = CliRunner().invoke(app, ["--help"]).stdout
    listed = {line.split()[0] for line in out.partition("Commands:")[2].splitlines() if line.strip()}
    assert listed == {
        *("alerts", "collect", "config", "dashboards", "degrade", "demo", "diagnose", "gateway"),
        *("probe", "report", "sim"),
    }
