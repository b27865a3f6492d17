"""prefill/prefix-reuse shows the share of the records' prompt tokens that the prefix cache served."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lanewatch.collector.diagnose import Window, lanes_from_records
from lanewatch.collector.record.timing import RequestTiming
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, SLO, Shape, records
from tests.unit.collector.diagnose.test_checks import _run

SIGNAL = "prompt tokens served from the prefix cache"


def _window(rows: list[RequestTiming]) -> Window:
    return Window(lanes_from_records(rows, {"slow": SLO}, server={"slow": HEALTHY_SERVER}))


def test_the_cached_share_is_over_every_prompt_token_once_some_record_reports_any() -> None:
    rows = records(Shape(prefill=1.5))
    # vLLM reports cached tokens only when there are some: the other records found none cached
    rows = [
        replace(r, cached_prompt_tokens=(r.prompt_tokens or 0) // 2) if i % 4 == 0 else r
        for i, r in enumerate(rows)
    ]
    f = _run("prefill/prefix-reuse", _window(rows))
    (shown,) = [s for s in f.evidence if s.signal == SIGNAL]
    cached = sum(r.cached_prompt_tokens or 0 for r in rows)
    prompt = sum(r.prompt_tokens or 0 for r in rows if r.error is None)
    assert cached > 0 and shown.value == pytest.approx(cached / prompt)
    assert "sum(cached_prompt_tokens) / sum(prompt_tokens)" in shown.source


def test_no_share_is_claimed_when_no_record_reports_cached_tokens() -> None:
    f = _run("prefill/prefix-reuse", _window(records(Shape(prefill=1.5))))
    assert f.verdict == "finding" and not [s for s in f.evidence if s.signal == SIGNAL]
