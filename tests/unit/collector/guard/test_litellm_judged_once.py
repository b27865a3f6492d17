"""A request through LiteLLM is judged once: by its handler's progress reports, never again by its
record, under the guard's default settings."""

from __future__ import annotations

from lanewatch.collector.guard.settings import GuardConfig
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.record.timing import RequestTiming

from .test_guard import Clock, _guard


def test_under_the_default_settings_a_litellm_request_is_judged_by_its_progress_alone() -> None:
    clock = Clock()
    guard = _guard(clock, record_sources=GuardConfig().record_sources)
    # The handler reported the request missed while it waited, then its record came.
    guard.progress("litellm-host-1-abc", [Progress(1, "fast", 0.8, False), Progress(1, "fast", 1.9, True)])
    guard.record(
        RequestTiming(source="litellm", target="t", lane="fast", request_class="c", model="m", ttft_s=1.9)
    )
    assert guard.verdicts[("fast", "missed")] == 1
    assert sum(guard.verdicts.values()) == 1
