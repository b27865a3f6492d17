"""Every number of a record from outside is held to what one request can be, naming the field: token
counts past MAX_TOKENS, whole numbers no int64 holds (or too long for Python's int), statuses that
are not three digits, vLLM's per-request metrics, gap totals with no gap; a real request's pass."""

from __future__ import annotations

import dataclasses
import json

import pytest

from lanewatch.collector.record.batch import parse_batch
from lanewatch.collector.record.codec import INT64_MAX, RecordDecodeError, decode_record
from lanewatch.collector.record.itl import ItlStats
from lanewatch.collector.record.plausible import MAX_DURATION_S, MAX_TOKENS, check_plausible, count_problem
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import RequestTiming
from tests.unit.collector.record.test_batch import RECENT, tap

NOW = RECENT + 60.0  # the arrival's wall clock: a minute after tap()'s starts
FIVE_GAPS = {"count": 5, "sum_s": 0.1, "min_s": 0.01, "max_s": 0.05}


def refusals(*items: dict[str, object]) -> list[tuple[int, str | None]]:
    """(index, field) of each refused item of a batch of these records."""
    return [
        (r.index, r.field) for r in parse_batch(json.dumps({"records": items}).encode(), None, NOW).refused
    ]


def wire(**changes: object) -> dict[str, object]:
    return {**tap(0).to_json(), **changes}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"output_tokens": 2**63 - 1, "prompt_tokens": 2**63 - 1}, "prompt_tokens"),  # the first count
        ({"output_tokens": 2**63 - 1}, "output_tokens"),
        ({"output_tokens": 2**64 + 5}, "output_tokens"),  # past int64
        ({"output_tokens": 10**400}, "output_tokens"),  # past any float
        ({"prompt_tokens": MAX_TOKENS + 1}, "prompt_tokens"),
        ({"prompt_tokens": MAX_TOKENS + 2, "cached_prompt_tokens": MAX_TOKENS + 1}, "prompt_tokens"),
        ({"status": 2**63 - 1}, "status"),
        ({"status": 1000}, "status"),
        ({"status": -1}, "status"),
        ({"e2e_s": 2**64 + 5}, "e2e_s"),  # a huge integer where seconds belong
        ({"e2e_s": 10**400}, "e2e_s"),
        ({"started_at": 2**64 + 5}, "started_at"),
        ({"response_queue_s": 10**30}, "response_queue_s"),
        ({"response_ttft_s": -0.5}, "response_ttft_s"),
        ({"response_tokens_per_s": 10**400}, "response_tokens_per_s"),
        ({"itl_stats": {"count": 2**63, "sum_s": 1.0, "min_s": 0.0, "max_s": 0.1}}, "itl_stats.count"),
        (
            {"itl_stats": {"count": 5, "sum_s": 0.1, "min_s": 0.01, "max_s": 0.05}, "itl_s": []},
            "itl_stats.count",
        ),
    ],
)
def test_a_number_no_request_could_have_is_refused_alone_naming_the_field(
    changes: dict[str, object], field: str
) -> None:
    assert refusals(wire(), wire(**changes), wire()) == [(1, field)]


def test_an_integer_too_long_for_python_refuses_its_record_not_the_body() -> None:
    body = json.dumps({"records": [wire(), wire(output_tokens=0), wire(e2e_s=0.0)]})
    body = body.replace('"output_tokens": 0', '"output_tokens": ' + "9" * 5000, 1)
    body = body.replace('"e2e_s": 0.0', '"e2e_s": -' + "9" * 5000, 1)
    batch = parse_batch(body.encode(), None, NOW)
    assert [(r.index, r.field) for r in batch.refused] == [(1, "output_tokens"), (2, "e2e_s")]
    assert len(batch.records) == 1 and batch.positions() == [0]


def test_the_bounds_pass_what_a_real_request_can_be() -> None:
    check_plausible(tap(0, prompt_tokens=MAX_TOKENS, output_tokens=MAX_TOKENS, cached_prompt_tokens=0), NOW)
    check_plausible(tap(0, status=0), NOW)  # no response
    check_plausible(tap(0, status=999, response_queue_s=MAX_DURATION_S, response_tokens_per_s=1e7), NOW)
    check_plausible(tap(0, itl_s=(), itl_stats=ItlStats(0, 0.0, 0.0, 0.0)), NOW)
    assert refusals(wire(output_tokens=0, prompt_tokens=MAX_TOKENS), wire(status=None)) == []
    assert [count_problem(v) is None for v in (None, 0, MAX_TOKENS, MAX_TOKENS + 1, -1)] == [
        True, True, True, False, False,
    ]  # fmt: skip


def test_a_huge_number_built_in_process_is_refused_with_a_message_not_an_overflow() -> None:
    """A record built directly (an Envoy entry's mapping) may hold an int no float holds; the
    message that names it must not raise OverflowError in its turn."""
    with pytest.raises(RecordError) as caught:
        check_plausible(dataclasses.replace(tap(0), e2e_s=10**400), NOW)
    assert caught.value.field == "e2e_s" and "~1e400" in caught.value.reason
    with pytest.raises(RecordError) as status:
        check_plausible(tap(0, status=10**5000), NOW)
    assert status.value.field == "status"


def test_a_records_line_holds_no_whole_number_past_int64() -> None:
    line = json.dumps(wire(output_tokens=INT64_MAX))
    assert decode_record(line).output_tokens == INT64_MAX  # the file reader's bound is int64 alone
    for value in (INT64_MAX + 1, 2**64 - 1, 10**400):
        with pytest.raises(RecordDecodeError) as caught:
            decode_record(json.dumps(wire(output_tokens=value)))
        assert caught.value.field == "output_tokens"


def test_every_whole_number_of_the_record_is_checked() -> None:
    """A new int field must be held too: this lists the ones the codec and the bounds check."""
    ints = [f.name for f in dataclasses.fields(RequestTiming) if f.type == "int | None"]
    assert ints == ["status", "prompt_tokens", "cached_prompt_tokens", "output_tokens"]
    for name in ints:
        assert refusals(wire(**{name: 2**64 + 5})) == [(0, name)]
