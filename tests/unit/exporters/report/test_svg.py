from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lanewatch.exporters.report.svg import (
    Frame,
    LegendItem,
    Scale,
    clock_unit,
    esc,
    fmt_seconds,
    latency_unit,
    legend,
    nice_axis,
    no_data,
    text,
    tick_label,
)

SVG = "{http://www.w3.org/2000/svg}"


def test_nice_axis_round_steps() -> None:
    assert nice_axis(0.0, 3.7) == (0.0, 4.0, [0.0, 1.0, 2.0, 3.0, 4.0])
    assert nice_axis(0.0, 0.043) == (0.0, 0.05, [0.0, 0.01, 0.02, 0.03, 0.04, 0.05])
    assert nice_axis(0.0, 260.0)[2] == [0.0, 100.0, 200.0, 300.0]


def test_nice_axis_degenerate_inputs_still_give_an_axis() -> None:
    lo, hi, ticks = nice_axis(0.0, 0.0)
    assert hi > lo and len(ticks) >= 2
    lo, hi, ticks = nice_axis(5.0, 5.0)
    assert lo <= 5.0 < hi
    assert nice_axis(float("nan"), 1.0)[2] == nice_axis(0.0, 1.0)[2]


@given(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
)
def test_nice_axis_covers_the_data(lo: float, width: float) -> None:
    hi = lo + width
    start, end, ticks = nice_axis(lo, hi)
    tol = 1e-9 * max(1.0, abs(lo), abs(hi))
    assert start <= lo + tol and end >= hi - tol
    assert 2 <= len(ticks) <= 12
    assert ticks == sorted(ticks)


def test_scale_maps_domain_onto_range_inverted_for_y() -> None:
    y = Scale(0.0, 10.0, 300.0, 50.0)
    assert (y(0.0), y(10.0), y(5.0)) == (300.0, 50.0, 175.0)
    assert Scale(1.0, 1.0, 0.0, 100.0)(1.0) == 50.0


def test_units_and_formats() -> None:
    assert latency_unit(0.4).name == "ms" and latency_unit(0.4).of(0.25) == 250.0
    assert latency_unit(2.0).name == "s"
    assert [clock_unit(s).name for s in (200, 3600, 86400)] == ["s", "min", "h"]
    formatted = [fmt_seconds(v) for v in (0, 0.0004, 0.0123, 1.4234, 250)]
    assert formatted == ["0 s", "400 µs", "12.3 ms", "1.42 s", "250 s"]
    assert tick_label(0.1 + 0.2) == "0.3"
    assert tick_label(1500.0) == "1500"


def test_text_is_escaped() -> None:
    out = text(1, 2, '<script>"x" & y</script>', cls='a"b')
    assert "<script>" not in out
    el = ET.fromstring(out)
    assert el.text == '<script>"x" & y</script>'
    assert el.get("class") == 'a"b'


def test_control_characters_are_made_visible_and_the_svg_stays_well_formed() -> None:
    out = text(1, 2, "a\x00b\x07c\td\x7f\x9b\ud800")
    el = ET.fromstring(out)  # XML 1.0 refuses raw NUL or BEL: parsing proves they are gone
    assert el.text == "a\\x00b\\x07c\td\\x7f\\x9b\\ud800"
    assert esc("\x01") == "\\x01" and esc("tab\tnew\nline") == "tab\tnew\nline"


def test_legend_wraps_rows_within_width() -> None:
    items = [LegendItem(f"lane-{i}-with-a-long-name", "#000") for i in range(8)]
    g = ET.fromstring(legend(items, 0, 10, 400))
    ys = {float(t.get("y", "0")) for t in g.iter("text")}
    assert len(ys) >= 3  # 8 labels of ~26 characters cannot fit in two 400-unit rows
    assert all(float(t.get("x", "0")) < 400 for t in g.iter("text"))


def test_no_data_has_a_message_and_no_marks() -> None:
    svg = ET.fromstring(no_data("c", Frame(), "label", "nothing <here>"))
    assert svg.get("data-chart") == "c"
    assert not [e for e in svg.iter() if "mark" in (e.get("class") or "").split()]
    assert [t.text for t in svg.iter(f"{SVG}text")] == ["nothing <here>"]


@pytest.mark.parametrize("value", [0.0, 1e-7, 59.9, 1e5])
def test_fmt_seconds_never_raises(value: float) -> None:
    assert fmt_seconds(value).endswith("s")
