"""The simulator against a captured real vLLM (tests/fixtures/vllm-*/), without vLLM installed.

The drift test fails when the simulator exposes a `vllm:` name, type, label key or bucket bound
that the real page lacks; the mutation tests show it does, on edited copies of the exposition.
"""

from __future__ import annotations

import re

import pytest

from lanewatch.simulator.tracing import SpanData, _attributes
from tests.vllm.contract import (
    FEATURE_FAMILIES,
    FIXTURES,
    KNOWN_DRIFT,
    Family,
    attribute_kinds,
    drift,
    families,
    lanewatch_reads,
    load_fixture,
    missing_reads,
    simulator_exposition,
    spec_decode_families,
)

VERSION = "0.32.0"  # the newest captured version: the mutation tests run against it
# Captured from a real engine (a page and a span dump); pages written from source have no spans.json.
VERSIONS = sorted(p.parent.name.removeprefix("vllm-") for p in FIXTURES.glob("vllm-*/spans.json"))


@pytest.fixture(scope="module")
def real() -> dict[str, Family]:
    page, _spans, _server = load_fixture(VERSION)
    return families(page)


@pytest.fixture(scope="module")
def sim_text() -> str:
    _page, _spans, server = load_fixture(VERSION)
    return simulator_exposition(server["max_model_len"])


def test_the_fixture_is_a_real_page_with_more_families_than_the_simulator(
    real: dict[str, Family], sim_text: str
) -> None:
    assert len(real) >= 60
    assert len(real) > len(families(sim_text)) >= 50


def test_every_captured_version_is_here() -> None:
    assert {"0.27.0", "0.32.0"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_no_drift_between_the_simulator_and_each_captured_page(version: str) -> None:
    page, _spans, server = load_fixture(version)
    sim = families(simulator_exposition(server["max_model_len"]))
    assert drift(sim, families(page)) == list(KNOWN_DRIFT.get(version, ()))


@pytest.mark.parametrize("version", VERSIONS)
def test_with_spec_decoding_on_the_only_additions_are_vllms_spec_decode_families(version: str) -> None:
    # The captures have no spec-decode families: those are checked against vLLM's source list.
    page, _spans, server = load_fixture(version)
    on = families(simulator_exposition(server["max_model_len"], spec_tokens=3))
    off = families(simulator_exposition(server["max_model_len"]))
    source = spec_decode_families()
    assert set(on) - set(off) == set(source)
    assert drift(on, {**families(page), **source}) == list(KNOWN_DRIFT.get(version, ()))
    assert not set(source) & set(families(page))  # if a capture ever has them, compare with it


def test_a_spec_decode_family_off_vllms_source_is_caught() -> None:
    text = simulator_exposition(4096, spec_tokens=2).replace(
        "vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_total"
    )
    page, _spans, _server = load_fixture(VERSION)
    problems = drift(families(text), {**families(page), **spec_decode_families()})
    assert "vllm:spec_decode_num_draft: not on the real page" in problems


@pytest.mark.parametrize("version", VERSIONS)
def test_every_family_lanewatch_reads_is_on_each_captured_page(version: str, sim_text: str) -> None:
    page, _spans, _server = load_fixture(version)
    reads = lanewatch_reads({n: f.type for n, f in families(sim_text).items()})
    assert set(FEATURE_FAMILIES) <= set(reads)  # read by the spec-decode panel; a draft model adds them
    assert missing_reads(reads, families(page)) == []


# Each edit of the simulator's exposition, and the drift it must cause.
MUTATIONS = [
    (
        "a name",
        lambda t: (
            t + "# HELP vllm:made_up_total x\n# TYPE vllm:made_up_total counter\n"
            'vllm:made_up_total{engine="0",model_name="tiny"} 1.0\n'
        ),
        "vllm:made_up: not on the real page",
    ),
    (
        "a type",
        lambda t: t.replace(
            "# TYPE vllm:num_requests_running gauge", "# TYPE vllm:num_requests_running untyped"
        ),
        "vllm:num_requests_running: type unknown here, gauge on the real page",
    ),
    (
        "a label key",
        lambda t: re.sub(r"vllm:kv_cache_usage_perc\{", 'vllm:kv_cache_usage_perc{pool="a",', t),
        "vllm:kv_cache_usage_perc: label keys ['pool'] not on the real page",
    ),
    (
        "a bucket bound",
        lambda t: re.sub(
            r'(vllm:time_to_first_token_seconds_bucket\{engine="0",le="0.001",model_name="tiny"\} \S+\n)',
            r'\1vllm:time_to_first_token_seconds_bucket{engine="0",le="0.003",model_name="tiny"} 0.0\n',
            t,
        ),
        "vllm:time_to_first_token_seconds: bucket bounds [0.003] not on the real page",
    ),
]


@pytest.mark.parametrize(("what", "mutate", "expected"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_drift_is_caught_when_the_simulator_adds(
    real: dict[str, Family], sim_text: str, what: str, mutate: object, expected: str
) -> None:
    assert callable(mutate)
    mutated = mutate(sim_text)
    assert mutated != sim_text, f"the mutation of {what} did not apply"
    assert drift(families(mutated), real) == [expected]


def test_a_real_page_missing_a_family_lanewatch_reads_is_reported(real: dict[str, Family]) -> None:
    fewer = {n: f for n, f in real.items() if n != "vllm:num_requests_waiting"}
    assert missing_reads({"vllm:num_requests_waiting": "gauge"}, fewer) == [
        "vllm:num_requests_waiting: read by lanewatch, not on the real page"
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_span_attributes_and_kinds_equal_each_captured_real_span(version: str) -> None:
    _page, spans, _server = load_fixture(version)
    requests = [s for s in spans if s["name"] == "llm_request"]
    assert requests, "no llm_request span in the fixture"
    data = SpanData("r", 0.0, 0.1, 0.5, 0.01, 0.05, 0.4, 7, 12, 12, 0.7, 0.9)
    for span in requests:
        assert span["attribute_kinds"] == attribute_kinds(_attributes(data)), span
        assert span["kind"] == 2  # SERVER
        attrs = span["attributes"]
        # seconds: the phases fit inside the span's own duration
        assert attrs["gen_ai.latency.e2e"] <= span["duration_s"] + 0.05
        assert attrs["gen_ai.latency.time_in_queue"] + attrs["gen_ai.latency.time_in_model_prefill"] <= (
            attrs["gen_ai.latency.time_to_first_token"] + 0.0005
        )
