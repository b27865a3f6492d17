from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.record.files import record_line
from tests.unit.exporters.report.sample_records import EVENTS, sample_records


def _records_file(folder: Path, n: int = 120) -> Path:
    path = folder / "records.jsonl"
    path.write_text("".join(record_line(r) for r in sample_records(n)), encoding="utf-8")
    return path


def _invoke(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["report", *args])
    return res.exit_code, res.stdout, res.stderr


def test_writes_the_report_beside_the_records_with_events_from_summary_json(tmp_path: Path) -> None:
    records = _records_file(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"lanes": {}, "events": EVENTS}), encoding="utf-8")
    code, out, err = _invoke(str(records))
    assert (code, err) == (0, "")
    assert (
        out == f"wrote {tmp_path / 'report.html'}: 120 records, 6 events from {tmp_path / 'summary.json'}\n"
    )
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.count('class="marker"') == 6
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_output_and_summary_options(tmp_path: Path) -> None:
    records = _records_file(tmp_path)
    summary = tmp_path / "elsewhere.json"
    summary.write_text(json.dumps({"events": EVENTS[:2]}), encoding="utf-8")
    code, out, _ = _invoke(str(records), "-o", str(tmp_path / "out" / "r.html"), "--summary", str(summary))
    assert code == 0 and "2 events" in out
    assert (tmp_path / "out" / "r.html").read_text(encoding="utf-8").count('class="marker"') == 2


def test_no_summary_means_no_markers(tmp_path: Path) -> None:
    code, out, _ = _invoke(str(_records_file(tmp_path)))
    assert code == 0 and "no summary.json (no markers)" in out
    assert 'class="marker"' not in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_bad_line_fails_naming_the_line_and_writes_nothing(tmp_path: Path) -> None:
    records = _records_file(tmp_path, 3)
    records.write_text(records.read_text() + '{"source": "probe", "lane": 3}\n', encoding="utf-8")
    code, out, err = _invoke(str(records))
    assert code == 1 and out == ""
    assert err.startswith(f"error: {records}: line 4: field 'lane': expected str, got int")
    assert "--skip-bad" in err
    assert not (tmp_path / "report.html").exists()


def test_skip_bad_counts_and_reports_skipped_lines(tmp_path: Path) -> None:
    records = _records_file(tmp_path, 30)
    lines = records.read_text().splitlines(keepends=True)
    lines[5:5] = ["not json\n"] * 12
    records.write_text("".join(lines), encoding="utf-8")
    code, out, err = _invoke(str(records), "--skip-bad")
    assert code == 0
    assert out.endswith("30 records, no summary.json (no markers), 12 bad lines skipped\n")
    assert err.count("skipped") == 11 and "line 6: not JSON" in err and "skipped 2 more bad lines" in err
    assert "bad lines skipped" in (tmp_path / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("content", "message"),
    [("", "no records (the file is empty)"), ("\n\n", "no records (the file is empty)"),
     ("x\ny\n", "no records (all 2 lines were bad)")],
)  # fmt: skip
def test_empty_input_is_a_clear_message(tmp_path: Path, content: str, message: str) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text(content, encoding="utf-8")
    code, _, err = _invoke(str(records), "--skip-bad")
    assert code == 1
    assert err == f"error: {records}: {message}; nothing to report\n"


def test_missing_records_file(tmp_path: Path) -> None:
    code, _, err = _invoke(str(tmp_path / "nope.jsonl"))
    assert code == 1 and "cannot read: No such file or directory" in err


@pytest.mark.parametrize(
    ("summary", "message"),
    [
        ("{not json", "not JSON"),
        ('{"events": [{"kind": "alert_firing"}]}', "events[0].t: expected Unix seconds"),
    ],
)
def test_bad_summary_is_named(tmp_path: Path, summary: str, message: str) -> None:
    records = _records_file(tmp_path, 5)
    (tmp_path / "summary.json").write_text(summary, encoding="utf-8")
    code, _, err = _invoke(str(records))
    assert code == 1 and err.startswith(f"error: {tmp_path / 'summary.json'}: {message}")


def test_help_describes_every_option() -> None:
    code, out, _ = _invoke("--help")
    assert code == 0
    for option in ("--output", "--summary", "--skip-bad", "self-contained", "offline"):
        assert option in out


def test_goodput_table_per_routed_lane_judged_by_the_slo_spec(tmp_path: Path) -> None:
    records = _records_file(tmp_path)
    spec = tmp_path / "slos.yaml"
    spec.write_text(
        "apiVersion: lanewatch/v1\nkind: SLOSpec\nmetadata: {name: t}\nspec:\n  slos:\n"
        "    - {name: ttft, lanes: [fast, slow], objective: 99, latency: {metric: ttft, threshold: 60.0}}\n",
        encoding="utf-8",
    )
    code, _, _ = _invoke(str(records), "--slo-spec", str(spec))
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert code == 0 and '<section id="goodput">' in page and "vllm bench serve --goodput" in page
    # a 60 s TTFT bound: only the failed requests miss, so goodput is each lane's success share
    goodput = page.split('<section id="goodput">', 1)[1]
    for lane in ("fast", "slow"):
        lane_records = [r for r in sample_records(120) if r.lane == lane]
        failed = sum(r.error is not None for r in lane_records)
        total = f"<td>{lane}</td><td>(all)</td><td>{len(lane_records)}</td>"
        assert f"{total}<td>{len(lane_records) - failed}</td><td>0</td><td>{failed}</td>" in goodput
    strict = tmp_path / "strict.yaml"
    strict.write_text(spec.read_text().replace("threshold: 60.0", "threshold: 0.001"), encoding="utf-8")
    code, _, _ = _invoke(str(records), "--slo-spec", str(strict))
    goodput = (tmp_path / "report.html").read_text(encoding="utf-8").split('<section id="goodput">', 1)[1]
    assert code == 0 and "<td>0.0%</td>" in goodput and "<td>100.0%</td>" not in goodput


def test_a_bad_slo_spec_is_named_and_writes_nothing(tmp_path: Path) -> None:
    records = _records_file(tmp_path, 5)
    spec = tmp_path / "bad.yaml"
    spec.write_text("apiVersion: lanewatch/v1\nkind: SLOSpec\nmetadata: {name: t}\nspec: {period: soon}\n")
    code, _, err = _invoke(str(records), "--slo-spec", str(spec))
    assert code == 1 and err.startswith("error: --slo-spec: invalid SLO spec") and "spec.period" in err
    assert not (tmp_path / "report.html").exists()


def test_control_characters_from_records_are_escaped_in_the_page(tmp_path: Path) -> None:
    from dataclasses import replace

    hostile = [
        replace(r, lane=f"slow\x00{i % 2}\x07", model="m\x1b[31m\x7f\x85")
        for i, r in enumerate(sample_records(40))
    ]
    records = tmp_path / "records.jsonl"
    records.write_text("".join(record_line(r) for r in hostile), encoding="utf-8")
    code, _, err = _invoke(str(records))
    assert (code, err) == (0, "")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    raw = sorted(
        {f"U+{ord(c):04X}" for c in page if (ord(c) < 0x20 and c not in "\t\n\r") or 0x7F <= ord(c) <= 0x9F}
    )
    assert raw == []
    assert "slow\\x000\\x07" in page and "m\\x1b[31m\\x7f\\x85" in page  # shown, not dropped
