"""The join under hostile spans: it never raises, evicts a flood by sender, and joins by parent span.

Each test reproduces what once went wrong: a NaN span waiting for its record made the record's
arrival raise (a 500 for POST /v1/records, exit 2 for `lanewatch probe`); 11,000 single-span
calls after one 512-span batch pushed out all 512; a client that chose a trace id someone else
used could hand them its own server times.
"""

from __future__ import annotations

from lanewatch.collector.probe.join import OrderedJoin
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.join import Joiner
from lanewatch.collector.record.timing import RequestTiming

NAN = float("nan")


def span(trace: int, queue: float = 0.01, *, sender: str = "", parent: str | None = None) -> ServerSpan:
    return ServerSpan(f"{trace:032x}", queue, 0.02, 0.3, parent_span_id=parent, sender=sender)


def record(trace: int, span_id: str | None = None, request_id: str | None = None) -> RequestTiming:
    return RequestTiming("tap", "t", "fast", "c", "m", trace_id=f"{trace:032x}", status=200,
                         span_id=span_id, request_id=request_id, ttft_s=0.1, e2e_s=0.5)  # fmt: skip


def test_a_nan_or_negative_span_is_refused_alone_before_or_after_its_record() -> None:
    joiner = Joiner(wait_s=5.0, max_pending=100)
    assert joiner.add_span(span(1, NAN), 0.0) == []  # first: it never waits
    assert joiner.pending == (0, 0)
    assert joiner.add_record(record(1), 0.1) == []  # the record waits, nothing raised
    assert joiner.add_span(span(1, -5.0), 0.2) == []  # after its record: refused, the record waits on
    (out,) = joiner.add_span(span(1), 0.3)  # the good span still joins
    assert out.queue_s == 0.01 and out.phases_source == "span"
    assert joiner.stats.spans_refused["invalid"] == 2
    assert (joiner.stats.spans_received, joiner.stats.spans_joined) == (1, 1)


def test_the_probe_join_takes_a_nan_span_then_its_record_without_raising() -> None:
    join = OrderedJoin(wait_s=1.0)
    assert join.add_spans([span(1, NAN)], 0.0) == []
    assert join.add_record(record(1), 0.1) == []  # waits for a good span
    (out,) = join.expire(1.2)
    assert out.trace_id == f"{1:032x}" and out.queue_s is None  # out unjoined, not lost


def test_eleven_thousand_single_span_calls_do_not_push_out_vllms_batch() -> None:
    joiner = Joiner(wait_s=60.0, max_pending=10_000)
    for i in range(512):  # one call from vLLM
        joiner.add_span(span(i + 1, sender="127.0.0.1/vllm"), 0.0, group=1)
    for k in range(11_000):  # each its own call, from another sender
        joiner.add_span(span((1 << 64) + k, sender="127.0.0.1/"), 0.0, group=2 + k)
    assert joiner.pending[1] == 10_000 and joiner.stats.orphan_spans == 512 + 11_000 - 10_000
    joined = [out for i in range(512) for out in joiner.add_record(record(i + 1), 1.0)]
    assert len(joined) == 512 and all(r.queue_s == 0.01 for r in joined)


def test_within_one_sender_the_largest_call_gives_way_first() -> None:
    joiner = Joiner(wait_s=60.0, max_pending=100)
    joiner.add_span(span(1, sender="h/vllm"), 0.0, group=1)
    for i in range(150):
        joiner.add_span(span(1000 + i, sender="h/vllm"), 0.0, group=2)
    assert joiner.add_record(record(1), 1.0)[0].queue_s == 0.01


def test_a_record_naming_its_span_takes_only_the_span_under_it() -> None:
    joiner = Joiner(wait_s=5.0, max_pending=100)
    victim, attacker = record(7, span_id="a" * 16), record(7, span_id="b" * 16)
    assert joiner.add_record(victim, 0.0) == [] and joiner.add_record(attacker, 0.0) == []
    # The attacker's span comes first, in the victim's trace: it joins the attacker's record only.
    (first,) = joiner.add_span(span(7, 9.0, parent="b" * 16), 0.1)
    assert first.span_id == "b" * 16 and first.queue_s == 9.0
    assert joiner.add_span(span(7, 8.0, parent=None), 0.2) == []  # no proof: never the victim's
    assert joiner.add_span(span(7, 8.0, parent="c" * 16), 0.2) == []
    (second,) = joiner.add_span(span(7, 0.01, parent="a" * 16), 0.3)
    assert second.span_id == "a" * 16 and second.queue_s == 0.01


def test_a_span_waiting_in_a_shared_trace_goes_to_the_record_it_is_under() -> None:
    joiner = Joiner(wait_s=5.0, max_pending=100)
    joiner.add_span(span(7, 9.0, parent="b" * 16), 0.0)
    joiner.add_span(span(7, 0.01, parent="a" * 16), 0.0)
    (out,) = joiner.add_record(record(7, span_id="a" * 16), 0.1)
    assert out.queue_s == 0.01
    (legacy,) = joiner.add_record(record(7), 0.2)  # a record without a span id: the old rule, in order
    assert legacy.queue_s == 9.0
