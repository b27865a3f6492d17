from __future__ import annotations

import xml.etree.ElementTree as ET

from lanewatch.exporters.report.charts import (
    Band,
    BoxGroup,
    BoxMark,
    LineSeries,
    Marker,
    PointSeries,
    StackedBar,
    box_chart,
    scatter_chart,
    stacked_bar_chart,
    timeline_chart,
)
from lanewatch.exporters.report.svg import LegendItem

SVG = "{http://www.w3.org/2000/svg}"
EVIL = '<script>alert("x")</script> & co'
COLORS = {"fast": "#0072B2", "slow": "#E69F00", EVIL: "#009E73"}


def _marks(svg: ET.Element) -> list[ET.Element]:
    return [e for e in svg.iter() if "mark" in (e.get("class") or "").split()]


def _titles(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{SVG}title")]


def test_box_chart_draws_one_mark_per_box_with_the_median_inside_the_box() -> None:
    groups = [
        BoxGroup("short", "≈16 tokens out", (BoxMark("fast", 0.1, 0.2, 0.3, 0.4, 0.5, "fast short"),
                                            BoxMark("slow", 1.0, 1.5, 2.0, 2.5, 3.0, "slow short"))),
        BoxGroup("story", "≈256 tokens out", (BoxMark("slow", 1.0, 1.2, 1.4, 1.6, 1.8, "slow story"),)),
    ]  # fmt: skip
    svg = ET.fromstring(box_chart("box", groups, COLORS, [LegendItem("fast", "#0072B2")], "E2E latency"))
    marks = _marks(svg)
    assert len(marks) == 3
    assert _titles(svg) == ["fast short", "slow short", "slow story"]
    rect = marks[1].find(f"{SVG}rect")
    assert rect is not None
    top, height = float(rect.get("y", "0")), float(rect.get("height", "0"))
    median_y = float(marks[1].findall(f"{SVG}line")[-1].get("y1", "0"))
    assert top < median_y < top + height  # median between q3 (top) and q1 (bottom)
    lower_median = float(marks[0].findall(f"{SVG}line")[-1].get("y1", "0"))
    assert lower_median > median_y  # 0.3 s sits lower on the page than 2.0 s
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "E2E latency (s)" in texts and "≈256 tokens out" in texts


def test_box_chart_without_boxes_says_so() -> None:
    svg = ET.fromstring(box_chart("box", [], COLORS, [], "E2E latency"))
    assert _marks(svg) == []
    assert "no successful requests" in "".join(t.text or "" for t in svg.iter(f"{SVG}text"))


def test_stacked_bars_are_proportional_and_adjacent() -> None:
    bars = [
        StackedBar("fast", (("send", 0.1), ("server_wait", 0.3), ("decode", 0.6)), "1 s"),
        StackedBar("slow", (("queue", 1.0), ("prefill", 0.5), ("residual", 0.0), ("decode", 0.5)), "2 s"),
    ]
    colors = {"send": "#111111", "queue": "#222222", "prefill": "#333333", "residual": "#444444",
              "server_wait": "#555555", "decode": "#666666", "dns": "#777777"}  # fmt: skip
    svg = ET.fromstring(stacked_bar_chart("phases", bars, colors, "mean time"))
    rects = _marks(svg)
    assert len(rects) == 7
    xs = [(float(r.get("x", "0")), float(r.get("width", "0"))) for r in rects]
    assert abs(xs[0][0] + xs[0][1] - xs[1][0]) < 0.02  # parts touch end to end
    fast_w = sum(w for _, w in xs[:3])
    slow_w = sum(w for _, w in xs[3:]) - 0.5  # the zero part is drawn 0.5 wide to stay hoverable
    assert abs(slow_w / fast_w - 2.0) < 0.01
    legend = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "legend-label"]
    assert legend == [
        "send",
        "queue",
        "prefill",
        "residual",
        "server_wait",
        "decode",
    ]  # dns unused: not listed
    assert [r.get("fill") for r in rects[:3]] == ["#111111", "#555555", "#666666"]


def test_scatter_draws_every_point_and_a_clipped_fit_line_per_fitted_series() -> None:
    series = [
        PointSeries("fast", ((16, 0.1), (64, 0.2), (256, 0.7)), (0.06, 0.0025)),
        PointSeries(EVIL, ((16, 1.0),), None),
    ]
    svg = ET.fromstring(
        scatter_chart("e2e", series, COLORS, [LegendItem(EVIL, "#009E73")], "output tokens", "E2E")
    )
    assert len([m for m in _marks(svg) if m.tag == f"{SVG}circle"]) == 4
    fits = [e for e in svg.iter(f"{SVG}line") if e.get("class") == "fit"]
    assert len(fits) == 1
    assert fits[0].get("clip-path") == "url(#plot-e2e)"
    assert svg.find(f".//{SVG}clipPath[@id='plot-e2e']") is not None
    assert float(fits[0].get("y1", "0")) > float(fits[0].get("y2", "0"))  # rises with the tokens
    assert any(t.startswith(EVIL) for t in _titles(svg))


def test_timeline_breaks_lines_at_gaps_and_draws_markers_and_bands() -> None:
    series = [
        LineSeries("fast", ((0, 0.1), (10, 0.12), (20, None), (30, 0.1), (40, 0.11))),
        LineSeries("slow", ((0, 0.5), (10, None), (20, 2.0), (30, None))),
    ]
    markers = [Marker(12, "#D62728", False, "fault injected"), Marker(35, "#D62728", True, "fault cleared")]
    bands = [Band("fault", 12, 35, "#D62728", "fault"), Band("alert", 15, 40, "#FF7F0E", "alert")]
    svg = ET.fromstring(timeline_chart("tl", series, COLORS, markers, bands, [], "P99 TTFT"))
    marks = _marks(svg)
    assert [m.tag.removeprefix(SVG) for m in marks] == ["polyline", "polyline", "circle", "circle"]
    assert len(marks[0].get("points", "").split()) == 2
    assert len([e for e in svg.iter() if e.get("class") == "marker"]) == 2
    assert [e.get("stroke-dasharray") for e in svg.iter() if e.get("class") == "marker"] == [None, "5 4"]
    assert len([e for e in svg.iter() if e.get("class") == "band"]) == 2
    texts = [t.text for t in svg.iter(f"{SVG}text")]
    assert "fault" in texts and "alert" in texts
    assert "time since the first request (s)" in texts


def test_timeline_with_only_gaps_has_no_marks() -> None:
    svg = ET.fromstring(timeline_chart("tl", [LineSeries("fast", ((0, None),))], COLORS, [], [], [], "P99"))
    assert _marks(svg) == []


def test_long_lane_names_are_shortened_beside_bars_but_whole_in_the_tooltip() -> None:
    name = "us-east-1-production-h100-pool-with-a-very-long-name"
    svg = ET.fromstring(
        stacked_bar_chart("phases", [StackedBar(name, (("decode", 1.0),))], {"decode": "#000"}, "t")
    )
    labels = [t.text or "" for t in svg.iter(f"{SVG}text") if t.get("class") == "group-label"]
    assert labels == [name[:27] + "…"]
    assert name in _titles(svg)
    assert float(svg.get("viewBox", "").split()[2]) == 960  # the plot keeps its width
