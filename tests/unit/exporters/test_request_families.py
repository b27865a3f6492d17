"""The request-metrics table: one entry per family drives its registration, observation and docs row."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry

from lanewatch.collector.record.goodput import Bound, Goodput
from lanewatch.collector.record.timing import ErrorKind
from lanewatch.exporters import names
from lanewatch.exporters.metrics_doc import request_metrics_table
from lanewatch.exporters.request_metrics import FAMILIES, HISTOGRAMS, RequestMetrics
from tests.unit.exporters.test_prometheus import rec, render, samples, value

CACHED = names.REQUEST_CACHED_PROMPT_TOKENS_TOTAL


def test_every_family_of_the_table_is_exported_and_described_and_nothing_else() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg, goodput=Goodput({"fast": (Bound("ttft_s", 1.0),)}))
    m.observe(rec(server=True))
    exported = {name for name, _ in samples(render(reg))}
    for f in FAMILIES:
        if f.kind == "histogram":
            assert f"{f.name}_count" in exported, f.name
    described = {d.name for d in m.describe()}  # a counter family's name is written without _total
    overflow = names.SERIES_OVERFLOW_TOTAL.removesuffix("_total")
    assert described == {f.name.removesuffix("_total") for f in FAMILIES} | {overflow}
    assert set(HISTOGRAMS) == {f.name for f in FAMILIES if f.kind == "histogram"}
    assert names.GOODPUT_REQUESTS_TOTAL not in {d.name for d in RequestMetrics(None).describe()}


def test_the_cached_prompt_tokens_counter_adds_what_each_request_reported_failed_or_not() -> None:
    reg = CollectorRegistry()
    m = RequestMetrics(reg)
    m.observe(dataclasses.replace(rec(), cached_prompt_tokens=16))
    m.observe(dataclasses.replace(rec(), cached_prompt_tokens=1))
    m.observe(dataclasses.replace(rec(error=ErrorKind.STALL), cached_prompt_tokens=8))  # served, then stalled
    m.observe(rec())  # not reported: adds nothing
    text = render(reg)
    assert value(text, CACHED, request_class="short") == 25.0
    assert value(text, names.TOKENS_TOTAL, request_class="short", token_type="input") == 17.0 * 4
    assert m.exposition() == text  # the incremental rendering says the same


def test_a_family_without_a_record_value_has_no_series() -> None:
    reg = CollectorRegistry()
    RequestMetrics(reg).observe(rec())
    assert not [name for name, _ in samples(render(reg)) if name == CACHED]


def test_each_family_is_one_row_of_the_docs_table() -> None:
    rows = request_metrics_table().splitlines()[2:]
    assert [r.split(" | ")[0] for r in rows] == [f"| `{f.name}`" for f in FAMILIES]
    assert all(f" | {f.kind} | {f.doc} | " in row for f, row in zip(FAMILIES, rows, strict=True))
