from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.exposition import parse_samples
from lanewatch.collector.collect.scrape import parse_metrics, relevant_chunks

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
PAGES = sorted(FIXTURES.rglob("*metrics*.txt"))

Norm = tuple[str, tuple[tuple[str, str], ...], float | str]


def _norm(samples: Iterable[tuple[str, Mapping[str, str], float]]) -> list[Norm]:
    return [(n, tuple(sorted(lb.items())), "nan" if math.isnan(v) else v) for n, lb, v in samples]


def _reference(lines: list[str]) -> list[Norm]:
    """prometheus_client's samples, line by line (no TYPE lines, as the scrape path parses)."""
    out = []
    for line in lines:
        for family in text_string_to_metric_families(line + "\n"):
            out += [(s.name, dict(s.labels), float(s.value)) for s in family.samples]
    return _norm(out)


def _sample_lines(page: str) -> list[str]:
    return [line for line in page.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_a_captured_page_is_present() -> None:
    assert any(p.name == "sim-fast-metrics.txt" for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_sample_of_a_captured_page_matches_prometheus_client(page: Path) -> None:
    lines = _sample_lines(page.read_text())
    assert len(lines) > 100
    assert _norm(parse_samples(lines)) == _reference(lines)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_lines_lanewatch_reads_match_prometheus_client(page: Path) -> None:
    text = page.read_text()
    lines = [line for chunk in relevant_chunks(text) for line in chunk.splitlines()]
    assert lines, "the page has vLLM metrics"
    assert _norm(parse_samples(lines)) == _reference(lines)
    gauges, counters, histograms = parse_metrics(text)
    assert histograms and gauges and counters


EDGE_LINES = [
    "a 1",
    "a 1.5e3",
    "a -0.25 1700000000000",
    "a NaN",
    "a +Inf",
    "a -Inf",
    'a{x="1"} 2',
    'a{x="1",} 2',
    'a{x="1",y="two words"} 2',
    "a{} 3",
    'a{x="q\\"uote"} 1',
    'a{x="back\\\\slash",y="new\\nline"} 1',
    'a{x = "1"} 1',
    'a{ x="1" } 1',
    'a{x="}"} 1',
    'a{x="a,b=c"} 1',
    'a{x="1"}\t1',
    "a  1",
    "a\t1",
    "a 1 2 3",
    "a 00012",
    "a 0x10",
    'a{__name__="b"} 1',
    "a:b_c 1",
]
BAD_LINES = [
    "a 1_000",
    "a one",
    'a{x="1",x="2"} 1',
    'a{x="1"y="2"} 1',
    "a{x=1} 1",
    'a{x="1" 1',
    "a 1 later",
    "a 1 2_0",
]


@pytest.mark.parametrize("line", EDGE_LINES)
def test_edge_lines_parse_as_prometheus_client_parses_them(line: str) -> None:
    try:
        expected = _reference([line])
    except ValueError as exc:
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            list(parse_samples([line]))
        return
    assert _norm(parse_samples([line])) == expected


@pytest.mark.parametrize("line", BAD_LINES)
def test_bad_lines_fail_as_in_prometheus_client(line: str) -> None:
    with pytest.raises(ValueError) as expected:  # noqa: PT011 (any message: the next line compares)
        _reference([line])
    with pytest.raises(ValueError, match=re.escape(str(expected.value))):
        list(parse_samples([line]))


def test_a_bad_line_makes_the_scrape_a_failed_parse_naming_it() -> None:
    page = (FIXTURES / "sim-fast-metrics.txt").read_text()
    broken = page.replace("vllm:num_requests_running{", "vllm:num_requests_running{engine=", 1)
    with pytest.raises(ValueError, match="unparsable /metrics"):
        parse_metrics(broken)


def test_label_sets_are_read_the_same_on_every_scrape() -> None:
    page = (FIXTURES / "sim-fast-metrics.txt").read_text()
    assert parse_metrics(page) == parse_metrics(page)  # the second parse reads cached label sets
