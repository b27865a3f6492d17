"""The one record builder: the answer's derived fields, decided once for every source."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from lanewatch.collector.openai_api.response_metrics import ResponseMetrics
from lanewatch.collector.openai_api.usage import USAGE_PATHS, Usage, parse_usage
from lanewatch.collector.record.builder import DERIVED, RecordBuilder
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from tests.layout import ROOT


def _builder(**kw: object) -> RecordBuilder:
    return RecordBuilder(source="tap", target="t", lane="fast", request_class="short", model="m", **kw)  # type: ignore[arg-type]


def test_the_usage_objects_completion_count_wins_over_the_counted_chunks() -> None:
    record = _builder(usage=Usage(prompt_tokens=12, completion_tokens=40), counted_tokens=38).build()
    assert (record.output_tokens, record.tokens_from_usage, record.prompt_tokens) == (40, True, 12)


@pytest.mark.parametrize("usage", [None, Usage(prompt_tokens=12, completion_tokens=None)])
def test_without_a_completion_count_the_counted_chunks_are_the_output(usage: Usage | None) -> None:
    record = _builder(usage=usage, counted_tokens=38).build()
    assert (record.output_tokens, record.tokens_from_usage) == (38, False)
    assert record.prompt_tokens == (None if usage is None else 12)


def test_every_usage_field_a_record_takes_reaches_it_with_no_source_touched() -> None:
    usage = parse_usage(
        {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 8}}
    )
    record = _builder(usage=usage).build()
    for name in USAGE_PATHS:
        if name != "completion_tokens":  # it becomes output_tokens
            assert getattr(record, name) == getattr(usage, name), name
    assert record.cached_prompt_tokens == 8


def test_a_reason_without_a_failure_is_dropped() -> None:
    assert _builder(status=200, error_message="fine").build().error_message is None
    b = _builder(error_message="no first token in 20 s")
    b.error = ErrorKind.TTFT_TIMEOUT  # learnt later, as a source learns it
    assert b.build().error_message == "no first token in 20 s"


def test_the_responses_metrics_give_the_phases() -> None:
    metrics = ResponseMetrics(queue_s=0.5, ttft_s=0.2, generation_s=1.0, mean_itl_s=0.02, tokens_per_s=50.0)
    record = _builder(metrics=metrics, e2e_s=1.8).build()
    assert (record.queue_s, record.prefill_s, record.decode_s, record.phases_source) == (
        0.5,
        0.2,
        1.0,
        "response",
    )


def test_a_time_no_request_could_take_is_refused_naming_the_field() -> None:
    with pytest.raises(RecordError) as err:
        _builder(ttft_s=-1.0).build()
    assert err.value.field == "ttft_s"


# Set after a source built the record: the span join and the response's metrics (with_response_metrics).
LATER = {"queue_s", "prefill_s", "decode_s", "phases_source"} | {
    f.name for f in dataclasses.fields(RequestTiming) if f.name.startswith("response_")
}


def test_every_record_field_is_set_by_a_source_derived_from_the_answer_or_set_later() -> None:
    on_builder = set(RecordBuilder.__slots__)
    unplaced = [
        f.name for f in dataclasses.fields(RequestTiming) if f.name not in on_builder | DERIVED | LATER
    ]
    assert unplaced == []
    assert not (on_builder & DERIVED)  # a derived field is never a source's to set


def _constructs_records(path: str) -> bool:
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    calls = (node.func for node in ast.walk(tree) if isinstance(node, ast.Call))
    return any(isinstance(f, ast.Name) and f.id == RequestTiming.__name__ for f in calls)


def test_every_source_builds_its_record_through_the_one_builder() -> None:
    built_elsewhere = [
        str(p.relative_to(ROOT))
        for folder in ("collector", "integrations")
        for p in (ROOT / folder).rglob("*.py")
        if _constructs_records(str(p.relative_to(ROOT)))
    ]
    assert built_elsewhere == ["collector/record/builder.py"]
