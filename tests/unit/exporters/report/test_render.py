from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import replace
from importlib import resources

import pytest

from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from lanewatch.exporters.report.data import build_report, parse_events
from lanewatch.exporters.report.render import render_report

from .sample_records import EVENTS, sample_records

X = "{http://www.w3.org/1999/xhtml}"
S = "{http://www.w3.org/2000/svg}"
CHARTS = ("e2e-box", "phases", "e2e-tokens", "ttft-tokens", "ttft-timeline")
EVIL_LANE = '<script>alert("lane")</script>'
EVIL_CLASS = "a&b <i>"
EVIL_TARGET = '"><img src=x onerror=alert(1)>'


def _parse(page: str) -> ET.Element:
    assert page.startswith("<!DOCTYPE html>\n")
    return ET.fromstring(page.removeprefix("<!DOCTYPE html>\n"))


def _marks_per_chart(root: ET.Element) -> dict[str, int]:
    return {
        svg.get("data-chart", ""): sum("mark" in (e.get("class") or "").split() for e in svg.iter())
        for svg in root.iter(f"{S}svg")
    }


@pytest.fixture(scope="module")
def page() -> str:
    return render_report(
        build_report(sample_records(), parse_events({"events": EVENTS}), source="demo.jsonl")
    )


def test_every_chart_has_marks(page: str) -> None:
    marks = _marks_per_chart(_parse(page))
    assert set(marks) == set(CHARTS)
    assert all(n > 0 for n in marks.values()), marks
    assert marks["e2e-box"] == 6 and marks["phases"] == 6 + 8


def test_markers_for_every_event_and_a_band_per_span(page: str) -> None:
    root = _parse(page)
    svg = next(s for s in root.iter(f"{S}svg") if s.get("data-chart") == "ttft-timeline")
    assert len([e for e in svg.iter() if e.get("class") == "marker"]) == len(EVENTS)
    assert len([e for e in svg.iter() if e.get("class") == "band"]) == 3
    events_table = next(t for t in root.iter(f"{X}table") if "events" in (t.get("class") or ""))
    assert len(events_table.findall(f"{X}tbody/{X}tr")) == len(EVENTS)


def test_page_is_self_contained(page: str) -> None:
    assert "<script" not in page.lower()
    assert not re.search(r"\bsrc=", page)
    assert re.findall(r'href="([^"]*)"', page) == [
        f"#{a}" for a in ("flat", "phases", "tokens", "timeline", "numbers")
    ]
    assert set(re.findall(r"url\(([^)]*)\)", page)) <= {"#plot-e2e-tokens", "#plot-ttft-tokens"}
    assert "@import" not in page and "@font-face" not in page
    # Only XML namespace names may look like URLs; nothing is fetched from them.
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls == {"http://www.w3.org/1999/xhtml", "http://www.w3.org/2000/svg"}


def test_the_stylesheet_can_be_inlined_verbatim() -> None:
    css = resources.files("lanewatch.exporters.report").joinpath("report.css").read_text(encoding="utf-8")
    assert "<" not in css and "&" not in css  # <style> is raw text in HTML, parsed text in XML


def test_numbers_table_rows_and_values() -> None:
    base = RequestTiming(
        source="probe", target="t", lane="fast", request_class="short", model="m", output_tokens=5
    )
    records = [replace(base, ttft_s=t, e2e_s=t + 0.4) for t in (0.1, 0.2, 0.3)]
    records.append(replace(base, output_tokens=None, error=ErrorKind.HTTP_429))
    root = _parse(render_report(build_report(records)))
    table = next(t for t in root.iter(f"{X}table") if "stats" in (t.get("class") or ""))
    rows = [["".join(td.itertext()) for td in tr] for tr in table.findall(f"{X}tbody/{X}tr")]
    assert len(rows) == 2  # the class, then the lane over all classes
    lane, cls, n, errors, ttft50, ttft95, ttft99, tpot50, *_rest = rows[0]
    assert (lane, cls, n, errors) == ("fast", "short", "4", "1 (25.0%)http_429 1")
    assert (ttft50, ttft95, ttft99) == ("200", "290", "298")
    assert tpot50 == "100"  # (0.6 - 0.2) / (5 - 1)
    assert rows[0][-3:] == ["600", "690", "698"]


def test_user_text_is_escaped_everywhere() -> None:
    records = [
        RequestTiming(
            source="probe", target=EVIL_TARGET, lane=EVIL_LANE, request_class=EVIL_CLASS, model="m&m",
            started_at=1.7e9 + i, ttft_s=0.1, e2e_s=0.5 + i / 100, output_tokens=10 + i,
        ).with_server_phases(0.01, 0.02, 0.3)
        for i in range(5)
    ]  # fmt: skip
    events = parse_events({"events": [{"t": 1.7e9 + 2, "kind": "alert_firing", "alertname": "</svg><b>"}]})
    page = render_report(build_report(records, events, source="<dir>/records.jsonl"))
    assert "<script" not in page and "<img" not in page and "<i>a" not in page and "</svg><b>" not in page
    root = _parse(page)  # still well-formed
    text = "".join(root.itertext())
    for name in (EVIL_LANE, EVIL_CLASS, EVIL_TARGET, "m&m", "</svg><b>", "<dir>/records.jsonl"):
        assert name in text
    assert all(n > 0 for n in _marks_per_chart(root).values())


def test_records_without_successes_render_placeholders_and_tables() -> None:
    failed = [
        RequestTiming(
            source="tap", target="t", lane="l", request_class="c", model="m", error=ErrorKind.CONNECT_REFUSED
        )
    ]
    root = _parse(render_report(build_report(failed)))
    assert set(_marks_per_chart(root).values()) == {0}
    assert len([e for e in root.iter() if e.get("class") == "empty"]) == len(CHARTS)
    assert "connect_refused 1" in "".join(root.itertext())
    assert "No events" in "".join(root.itertext())


def test_no_records_renders_a_message() -> None:
    root = _parse(render_report(build_report([])))
    assert list(root.iter(f"{S}svg")) == []
    assert "holds no records" in "".join(root.itertext())


def test_a_falling_fit_reads_as_a_minus_sign_in_the_legend() -> None:
    from lanewatch.collector.record.window import LinearFit
    from lanewatch.exporters.report.data import LanePoints
    from lanewatch.exporters.report.render import _fit_legend

    def legend(per_token_s: float) -> str:
        return _fit_legend(LanePoints("fast", "ttft", (), 0, LinearFit(0.0128, per_token_s, 1.0, 0.0, 9)))

    assert legend(-1e-6) == "fast: 12.8 ms − 1 µs/token, R² 0.00"
    assert legend(0.00249) == "fast: 12.8 ms + 2.49 ms/token, R² 0.00"


def test_failed_requests_show_the_servers_message_most_frequent_first_escaped() -> None:
    def failed(message: str, status: int = 400) -> RequestTiming:
        return RequestTiming(
            source="probe", target="t", lane="fast", request_class="c", model="m",
            status=status, error=ErrorKind.HTTP_4XX, error_message=message,
        )  # fmt: skip

    long_prompt = "This model's maximum context length is 2048 tokens."
    records = [failed(long_prompt)] * 3 + [failed("<b>bad</b> request")] + sample_records()[:5]
    data = build_report(records)
    assert [(r.message, r.count, r.status) for r in data.reasons] == [
        (long_prompt, 3, 400),
        ("<b>bad</b> request", 1, 400),
    ]
    page = render_report(data)
    assert "<b>bad</b>" not in page
    root = _parse(page)
    table = next(t for t in root.iter(f"{X}table") if "reasons" in (t.get("class") or ""))
    rows = ["|".join(td.text or "" for td in tr) for tr in table.iter(f"{X}tr")][1:]
    assert rows == [f"fast|http_4xx|400|3|{long_prompt}", "fast|http_4xx|400|1|<b>bad</b> request"]


def test_the_rescue_section_shows_only_when_the_gateway_rescued() -> None:
    records = sample_records()
    assert 'id="rescue"' not in render_report(build_report(records))
    rescued = RequestTiming(
        source="tap", target="fast", lane="fast", request_class="c", model="m", status=200, ttft_s=1.9,
        late_lane="slow", rescue_sent_s=1.8, late_wait_s=2.1,
    )  # fmt: skip
    page = render_report(build_report([*records, rescued]))
    section = page[page.index('id="rescue"') :]
    assert "<td>slow</td><td>fast</td><td>1</td><td>1</td><td>0.20 s</td>" in section
