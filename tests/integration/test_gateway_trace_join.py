"""A client's own `traceparent` through the gateway cannot poison the span join for others.

Reproduces what once went wrong: a client that sent the trace id of someone else's request got
its server times joined to that request's record (records of one trace matched spans in order).
Now each gateway record names the span it sent upstream, and takes only the span under it.
"""

from __future__ import annotations

import pytest

from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.join import Joiner

from .gateway_harness import chat_body, one_lane

pytestmark = pytest.mark.integration
CHAT = "/v1/chat/completions"
VICTIM = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


async def test_a_record_joins_only_the_span_its_own_upstream_request_made() -> None:
    async with one_lane() as (up, g, s):
        for _ in range(2):  # the victim, then a client replaying the victim's traceparent
            async with s.post(g.url + CHAT, json=chat_body(), headers={"traceparent": VICTIM}) as r:
                await r.read()
    sent = [log.headers["traceparent"].split("-") for log in up.requests.values()]
    victim, attacker = g.records[0], g.records[1]
    assert victim.trace_id == attacker.trace_id == "0af7651916cd43dd8448eb211c80319c"
    assert [victim.span_id, attacker.span_id] == [parts[2] for parts in sent]  # each its own parent-id
    assert victim.span_id != attacker.span_id

    # vLLM parents its llm_request span on the traceparent it received; the attacker's span comes first.
    joiner = Joiner(wait_s=5.0, max_pending=100)
    assert joiner.add_record(victim, 0.0) == [] and joiner.add_record(attacker, 0.0) == []
    trace = victim.trace_id or ""
    (first,) = joiner.add_span(ServerSpan(trace, 9.0, 9.0, 9.0, parent_span_id=sent[1][2]), 0.1)
    (second,) = joiner.add_span(ServerSpan(trace, 0.01, 0.02, 0.3, parent_span_id=sent[0][2]), 0.2)
    assert (first.span_id, first.queue_s) == (attacker.span_id, 9.0)
    assert (second.span_id, second.queue_s) == (victim.span_id, 0.01)
