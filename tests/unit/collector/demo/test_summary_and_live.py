"""summary.json's loop timings and content; the live view and the --no-live event lines."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from lanewatch.collector.demo.events import Event
from lanewatch.collector.demo.live import Snapshot, event_line, render, stage_text
from lanewatch.collector.demo.summary import build_summary, loop_timings, rescue_line, write_summary
from lanewatch.collector.demo.timeline import Plan
from lanewatch.collector.record.goodput import Bound, Goodput
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.collector.record.window import Summary, summarize
from lanewatch.exporters.report.data import parse_events

T0 = 1_800_000_000.0
PAGE = {"alertname": "LanewatchTTFTBurnRate", "lane": "slow", "severity": "page", "slo": "ttft"}
STORY = [
    Event(T0 + 20, "fault_injected", {"lane": "slow", "queue_delay_s": 3.0}),
    Event(
        T0 + 26, "alert_firing", {"alertname": "LanewatchTPOTBurnRate", "lane": "slow", "severity": "ticket"}
    ),
    Event(T0 + 31, "alert_firing", PAGE),
    Event(T0 + 32, "degrade_applied", {"lane": "slow", "shift_to": "fast", "shift_percent": 100}),
    Event(T0 + 47, "fault_cleared", {"lane": "slow"}),
    Event(T0 + 80.5, "alert_resolved", PAGE),
    Event(T0 + 86.5, "degrade_restored", {"lane": "slow"}),
]


def test_loop_timings_follow_the_ttft_page_of_the_lane() -> None:
    assert loop_timings(STORY) == {
        "fault_to_alert_s": 11.0,
        "alert_to_degrade_s": 1.0,
        "clear_to_resolve_s": 33.5,
        "resolve_to_restore_s": 6.0,
        "fired_by": "rules",
    }
    assert loop_timings(STORY[:4]) == {
        "fault_to_alert_s": 11.0,
        "alert_to_degrade_s": 1.0,
        "clear_to_resolve_s": None,
        "resolve_to_restore_s": None,
        "fired_by": "rules",
    }
    assert set(loop_timings([]).values()) == {None}


def test_the_loop_follows_the_fast_guard_when_it_fires_first_and_resolves_with_the_last_alert() -> None:
    guard = {**PAGE, "alertname": "LanewatchTTFTMitigation", "severity": "mitigate", "source": "guard"}
    story = [
        Event(T0 + 20, "fault_injected", {"lane": "slow"}),
        Event(T0 + 23.5, "alert_firing", guard),
        Event(T0 + 24, "degrade_applied", {"lane": "slow", "shift_to": "fast", "shift_percent": 100}),
        Event(T0 + 31, "alert_firing", PAGE),
        Event(T0 + 47, "fault_cleared", {"lane": "slow"}),
        Event(T0 + 58, "alert_resolved", guard),
        Event(T0 + 80.5, "alert_resolved", PAGE),
        Event(T0 + 86.5, "degrade_restored", {"lane": "slow"}),
    ]
    assert loop_timings(story) == {
        "fault_to_alert_s": 3.5,
        "alert_to_degrade_s": 0.5,
        "clear_to_resolve_s": 33.5,
        "resolve_to_restore_s": 6.0,
        "fired_by": "guard",
    }


def test_the_loop_follows_the_lanes_first_page_whichever_it_is_and_resolves_with_its_last() -> None:
    tpot = {"alertname": "LanewatchTPOTBurnRate", "lane": "slow", "severity": "page", "slo": "tpot"}
    story = [
        Event(T0 + 20, "fault_injected", {"lane": "slow"}),
        Event(T0 + 60, "alert_firing", tpot),  # decode steps waited behind the burst's prefill first
        Event(T0 + 61, "degrade_applied", {"lane": "slow", "shift_to": "fast", "shift_percent": 100}),
        Event(T0 + 85, "alert_firing", PAGE),
        Event(T0 + 200, "fault_cleared", {"lane": "slow"}),
        Event(T0 + 239, "alert_resolved", tpot),
        Event(T0 + 250, "alert_firing", {**PAGE, "lane": "fast"}),  # another lane's page is not this one's
        Event(T0 + 314, "alert_resolved", PAGE),
        Event(T0 + 319, "degrade_restored", {"lane": "slow"}),
    ]
    assert loop_timings(story) == {
        "fault_to_alert_s": 40.0,
        "alert_to_degrade_s": 1.0,
        "clear_to_resolve_s": 114.0,  # the last of the lane's pages, not the first to resolve
        "resolve_to_restore_s": 5.0,
        "fired_by": "rules",
    }
    still_firing = [e for e in story if not (e.kind == "alert_resolved" and e.details == PAGE)]
    assert loop_timings(still_firing)["clear_to_resolve_s"] is None


def test_summary_holds_lanes_events_and_the_run_and_the_report_reads_its_events(tmp_path: Path) -> None:
    records = [
        RequestTiming("probe", "vllm-slow", "slow", "story", "m", ttft_s=3.2, e2e_s=9.0, output_tokens=256),
        RequestTiming("tap", "127.0.0.1:1", "fast", "story", "m", ttft_s=0.02, e2e_s=0.7, output_tokens=256),
    ]
    summary = build_summary(records, STORY, {"seed": 7, "interrupted": False})
    assert summary["seed"] == 7 and summary["story_complete"] is True
    assert summary["loop"]["clear_to_resolve_s"] == 33.5
    assert summary["lanes"]["slow"]["by_source"] == {"probe": 1}
    assert summary["lanes"]["fast"]["metrics"]["ttft"]["p99"] == 0.02
    assert [e["kind"] for e in summary["events"]][:3] == ["fault_injected", "alert_firing", "alert_firing"]
    assert summary["events"][0] == {
        "t": T0 + 20,
        "kind": "fault_injected",
        "lane": "slow",
        "queue_delay_s": 3.0,
    }
    path = tmp_path / "summary.json"
    write_summary(path, summary)
    assert [e.kind for e in parse_events(json.loads(path.read_text()))] == [e.kind for e in STORY]


def test_event_lines_say_when_what_and_the_details() -> None:
    line = event_line(STORY[2], started_at=T0)
    assert "+ 31.0s" in line and "alert_firing" in line
    assert line.endswith("alertname=LanewatchTTFTBurnRate lane=slow severity=page slo=ttft")
    assert "version" not in event_line(Event(T0, "degrade_restored", {"lane": "slow", "version": 2}))


def _summary(values: list[float]) -> Summary:
    summary = summarize(values)
    assert summary is not None
    return summary


def test_the_live_view_shows_phases_per_lane_burn_alerts_degrade_and_events() -> None:
    lanes = {
        "fast": {"ttft": _summary([0.010, 0.030]), "e2e": _summary([0.1, 0.5])},
        "slow": {"ttft": _summary([3.1, 3.3]), "queue": _summary([3.0, 3.0])},
    }
    snap = Snapshot(
        elapsed_s=42,
        stage="degraded",
        lanes=lanes,
        burn={"slow": 75.25, "fast": 0.0},
        alerts=["LanewatchTTFTBurnRate slow page"],
        degrade={"slow": {"shift_to": "fast", "shift_percent": 100}},
        shifted=(0.97, 33),
        traffic="4 req/s",
        events=STORY[:4],
        started_at=T0,
    )
    console = Console(width=120, record=True)
    console.print(render(snap))
    text = console.export_text()
    for phase in ("dns", "connect", "tls", "queue", "prefill", "ttft", "itl", "tpot", "decode", "e2e"):
        assert f" {phase} " in text
    assert "fast lane" in text and "slow lane" in text
    assert "3,200 / 3,298" in text  # slow TTFT p50 / p99 in ms
    assert "10.2 / 29.8" not in text and "20.0 / 29.8" in text
    assert "slow 75.2x" in text or "slow 75.3x" in text
    assert "LanewatchTTFTBurnRate slow page" in text
    assert "slow: shift 100% to fast" in text and "97% served by the fast lane" in text
    assert "degrade_applied" in text and "+ 32.0s" in text
    calm = Console(width=120, record=True)
    calm.print(render(Snapshot(elapsed_s=1, stage="warming up")))
    assert "none: every lane serves its own traffic" in calm.export_text()


def test_the_stage_says_what_the_demo_waits_for() -> None:
    plan = Plan(warmup_s=20)
    assert stage_text([], plan, 3) == "warming up: the fault comes at 20 s"
    assert "waiting for the alert" in stage_text([(20, "fault_injected")], plan, 25)
    assert "queue_delay_s 3.0" in stage_text([(20, "fault_injected")], plan, 25)
    assert stage_text([(20, "fault_injected"), (31, "alert_firing")], plan, 31).startswith("alert firing")
    assert stage_text([(86, "degrade_restored")], plan, 90).startswith("restored")


def _tap(at: float, ttft: float, lane: str = "slow", routed: str = "slow") -> RequestTiming:
    r = RequestTiming(
        source="tap", target=f"vllm-{lane}", lane=lane, request_class="long", model="m", started_at=at,
        status=200, ttft_s=ttft, e2e_s=ttft + 1.0, output_tokens=41, attrs={"routed_lane": routed},
    )  # fmt: skip
    return r


def test_goodput_falls_in_the_fault_and_recovers_under_the_degrade_by_routed_lane() -> None:
    judge = Goodput(bounds={"slow": (Bound("ttft", 2.0),), "fast": (Bound("ttft", 0.5),)})
    records = [
        _tap(T0 + 5, 0.5),
        _tap(T0 + 10, 0.6),  # before: 2 of 2
        _tap(T0 + 21, 3.5),
        _tap(T0 + 25, 3.2),  # fault, not yet degraded: 0 of 2
        _tap(T0 + 35, 0.3, lane="fast"),  # degraded: shifted to fast, judged for slow: met
        _tap(T0 + 40, 3.1),  # a slow one in the degrade (a probe or a request not shifted): missed
        _tap(T0 + 50, 0.5),  # after
    ]
    shed = [(T0 + 45, "slow", "long")]
    summary = build_summary(records, STORY, {}, judge, shed)["goodput"]
    assert summary["phases"] == {
        "before": [None, T0 + 20],
        "fault": [T0 + 20, T0 + 32],
        "degraded": [T0 + 32, T0 + 47],
        "after": [T0 + 47, None],
    }
    slow = {phase: lanes["slow"]["tap"] for phase, lanes in summary["by_phase"].items()}
    assert slow["before"] == {"ratio": 1.0, "met": 2, "missed": 0, "failed": 0}
    assert slow["fault"]["ratio"] == 0.0
    assert slow["degraded"] == {"ratio": 0.3333, "met": 1, "missed": 2, "failed": 0}  # the shed one missed
    assert slow["after"]["ratio"] == 1.0
    assert "fast" not in summary["by_phase"]["degraded"]  # the shifted request counts for slow


def test_without_a_fault_every_request_is_before() -> None:
    judge = Goodput()
    summary = build_summary([_tap(T0, 9.0)], [], {}, judge)["goodput"]
    assert summary["phases"] == {"before": [None, None]}
    assert summary["by_phase"]["before"]["slow"]["tap"]["ratio"] == 1.0


def test_the_summary_says_how_many_requests_the_rescue_answered_during_the_fault() -> None:
    judge = Goodput(bounds={"slow": (Bound("ttft", 2.0),), "fast": (Bound("ttft", 0.5),)})
    rescued = replace(_tap(T0 + 22, 1.9, lane="fast"), late_lane="slow", rescue_sent_s=1.8, late_wait_s=2.1)
    records = [
        _tap(T0 + 5, 3.0),  # before the fault: not counted
        rescued,
        _tap(T0 + 24, 3.2),  # not rescued (the bucket, an opt-out): missed
        _tap(T0 + 40, 3.1),  # in the degrade: not counted
    ]
    rescue = build_summary(records, STORY, {}, judge)["rescue"]
    assert rescue == {"lane": "slow", "slo_s": 2.0, "streamed": 2, "rescued": 1, "missed": 1}
    assert rescue_line(rescue) == (
        "rescue: 1 of 2 streamed slow-lane requests during the fault were answered by a faster lane; "
        "1 still missed the 2 s TTFT SLO"
    )
    assert build_summary(records, [], {}, judge)["rescue"] is None  # no fault, nothing to tell
