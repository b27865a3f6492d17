"""The report in a real browser: Debian's headless Chromium renders it, every chart has data,
nothing logs to the console, and the screenshot shows the charts' colours."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import cast

import pytest
from PIL import Image

from lanewatch.collector.record.files import record_line
from lanewatch.exporters.report.file import write_report
from lanewatch.exporters.report.render import PART_COLORS
from lanewatch.exporters.report.svg import LANE_PALETTE
from tests.conftest import require_binary
from tests.unit.exporters.report.sample_records import EVENTS, sample_records

pytestmark = pytest.mark.integration

CHARTS = {"e2e-box", "phases", "e2e-tokens", "ttft-tokens", "ttft-timeline"}
# Headless, no profile state, nothing fetched: the proxy points at a closed port, so a page that
# needed the network would come out broken here.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--proxy-server=127.0.0.1:9", "--enable-logging=stderr", "--v=0",
)  # fmt: skip
WIDTH, HEIGHT = 1200, 5200


@dataclass(frozen=True)
class Rendered:
    dom: str
    log: str
    screenshot: Path


def _chromium(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [chromium, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    chromium = require_binary("chromium")
    folder = tmp_path_factory.mktemp("report")
    records = folder / "records.jsonl"
    records.write_text("".join(record_line(r) for r in sample_records(400)), encoding="utf-8")
    (folder / "summary.json").write_text(json.dumps({"events": EVENTS}), encoding="utf-8")
    page = folder / "report.html"
    assert write_report(records, page).events == len(EVENTS)
    url = page.as_uri()
    dump = _chromium(chromium, folder / "profile", "--dump-dom", url)
    shot = folder / "report.png"
    _chromium(chromium, folder / "profile", f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}", url)
    return Rendered(dump.stdout, dump.stderr, shot)


class _ChartMarks(HTMLParser):
    """Counts elements with class "mark" inside each <svg data-chart=...> of a DOM dump."""

    def __init__(self) -> None:
        super().__init__()
        self.chart: str | None = None
        self.marks: Counter[str] = Counter()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "svg" and a.get("data-chart"):
            chart = a["data-chart"] or ""
            self.chart = chart
            self.marks[chart] += 0
        elif self.chart and "mark" in (a.get("class") or "").split():
            self.marks[self.chart] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.chart = None


def test_browser_dom_has_every_chart_with_data(rendered: Rendered) -> None:
    parser = _ChartMarks()
    parser.feed(rendered.dom)
    assert set(parser.marks) == CHARTS
    assert all(n > 0 for n in parser.marks.values()), parser.marks
    assert parser.marks["e2e-box"] == 6
    assert "lanewatch latency report" in rendered.dom


def test_no_console_messages(rendered: Rendered) -> None:
    console = [line for line in rendered.log.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []


def test_screenshot_is_not_blank_and_shows_the_charts(rendered: Rendered) -> None:
    with Image.open(rendered.screenshot) as img:
        assert img.size == (WIDTH, HEIGHT)
        colors = img.convert("RGB").getcolors(maxcolors=WIDTH * HEIGHT)
    assert colors is not None
    pixels: Counter[tuple[int, int, int]] = Counter({cast(tuple[int, int, int], rgb): n for n, rgb in colors})
    _background, bg_count = pixels.most_common(1)[0]
    assert bg_count < 0.8 * WIDTH * HEIGHT  # cards, text and charts cover the rest
    assert len(pixels) > 500  # text and antialiased lines, not a flat fill

    def rgb(hex_color: str) -> tuple[int, int, int]:
        return int(hex_color[1:3], 16), int(hex_color[3:5], 16), int(hex_color[5:7], 16)

    # Solid fills drawn in exact colours: the two lanes' legend swatches and lines, and the decode bars.
    for color in (LANE_PALETTE[0], LANE_PALETTE[1], PART_COLORS["decode"], PART_COLORS["queue"]):
        assert pixels[rgb(color)] > 300, color
