"""The report's Diagnosis section: at the top, the findings `lanewatch diagnose` gives for its records."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from typer.testing import CliRunner

from lanewatch.alerts.spec import DEMO_SPEC, load_spec
from lanewatch.collector.cli import app
from lanewatch.collector.record.files import record_line
from lanewatch.collector.record.goodput import from_spec
from lanewatch.exporters.report.data import build_report
from lanewatch.exporters.report.diagnosis import diagnosis_of
from lanewatch.exporters.report.render import render_report

from .sample_records import sample_records
from .test_render import EVIL_LANE, X, _parse

JUDGE = from_spec(load_spec(DEMO_SPEC))


def _sections(root: ET.Element) -> list[ET.Element]:
    return list(root.iter(f"{X}section"))


def _text(e: ET.Element) -> str:
    return "".join(e.itertext())


def test_the_diagnosis_comes_first_and_names_the_slow_lanes_queue() -> None:
    root = _parse(render_report(build_report(sample_records(), judge=JUDGE)))
    sections = _sections(root)
    assert sections[0].get("id") == "diagnosis" and sections[1].get("id") == "flat"
    text = _text(sections[0])
    assert "3 findings, from the records alone" in text and "anchored to the lanes' SLOs" in text
    lanes = {_text(h).split(" lane:")[0]: _text(h) for h in sections[0].iter(f"{X}h3")}
    assert lanes == {
        "fast": "fast lane: 1 found, top errors/shedding",
        "slow": "slow lane: 2 found, top queue/unsplit",
    }
    assert "queue/unsplit: queue-bound, cause unsplit (explains 92% of TTFT)" in text
    assert "queue share of TTFT: 0.9209 >= 0.4 ← breached" in text  # its evidence, held to its threshold
    assert "Would split or measure it: vllm:num_requests_waiting" in text  # records alone: phase level
    assert "Ruled out: connection/setup" in text


def test_the_section_agrees_with_lanewatch_diagnose_on_the_same_records(tmp_path: Path) -> None:
    records = sample_records()
    path = tmp_path / "records.jsonl"
    path.write_text("".join(record_line(r) + "\n" for r in records), encoding="utf-8")
    done = CliRunner().invoke(app, ["diagnose", str(path), "--slo-spec", str(DEMO_SPEC), "--json"])
    assert done.exit_code == 1, done.output  # findings
    doc = json.loads(done.output)
    section = _sections(_parse(render_report(build_report(records, judge=JUDGE))))[0]
    shown = [_text(li).split(":")[0] for ol in section.iter(f"{X}ol") for li in ol.findall(f"{X}li")]
    found = [f["check"] for lane in doc["lanes"] for f in lane["findings"] if f["verdict"] == "finding"]
    assert shown == found and doc["found"] == len(found) == 3


def test_names_in_the_diagnosis_are_escaped() -> None:
    records = [replace(r, lane=EVIL_LANE) if r.lane == "slow" else r for r in sample_records()]
    page = render_report(build_report(records, judge=JUDGE))
    section = _sections(_parse(page))[0]  # still well-formed
    assert f"{EVIL_LANE} lane:" in _text(section)
    assert "<script" not in page.lower()


def test_without_records_there_is_no_diagnosis() -> None:
    root = _parse(render_report(build_report([], judge=JUDGE)))
    assert all(s.get("id") != "diagnosis" for s in _sections(root))


def test_the_unknown_checks_are_one_line_per_lane_with_the_missing_data_disclosed() -> None:
    records = sample_records()
    section = _sections(_parse(render_report(build_report(records, judge=JUDGE))))[0]
    lanes = {lane.lane: lane for lane in diagnosis_of(records, JUDGE)}
    disclosures = list(section.iter(f"{X}details"))
    assert [d.get("class") for d in disclosures] == ["unknown", "unknown"]  # one per lane, fast then slow
    for details, name in zip(disclosures, ("fast", "slow"), strict=True):
        unknown = [f for f in lanes[name].findings if f.verdict == "unknown"]
        missing = list(dict.fromkeys(s for f in unknown for s in f.missing))
        (summary,) = details.findall(f"{X}summary")
        assert _text(summary) == (
            f"{len(unknown)} checks unknown: missing {missing[0]} and {len(missing) - 1} more"
        )
        rows = [_text(li) for li in details.iter(f"{X}li")]
        assert [r.split(": ")[0] for r in rows] == missing  # each missing series once, behind the line
        for f in unknown:
            assert all(f.check in rows[missing.index(s)] for s in f.missing)
    # the long per-check lines are gone from the open page
    assert "cannot judge" not in _text(section)
    assert not [ul for ul in section.iter(f"{X}ul") if ul.get("class") == "unknown"]
