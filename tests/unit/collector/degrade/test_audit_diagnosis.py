"""Why the controller acted: each action's audit carries a diagnosis of the lane, and never waits on it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.audit_diagnosis import DiagnosisContext, PrometheusWhy
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.status import status_text
from lanewatch.collector.degrade.webhook import parse_notification
from lanewatch.collector.diagnose import SloTargets
from tests.unit.collector.diagnose.test_prometheus import _prometheus, _queue_bound
from tests.waiting import eventually

from .conftest import POLICY, Controller
from .test_service import SHIFT50, firing, resolved

URL = "http://prom.test:9090"
CONTEXT = DiagnosisContext({"slow": SloTargets(ttft_s=2.0, tpot_s=0.05)})


def _with_why(controller: Controller, transport: httpx.BaseTransport, timeout_s: float = 5.0) -> None:
    why = PrometheusWhy(URL, CONTEXT, window="1m", timeout_s=timeout_s, transport=transport)
    c = controller
    c.service = DegradeService(POLICY, c.store, [c.adapter], c.metrics, clock=c.clock, why=why)


def _diagnoses(controller: Controller) -> list[dict[str, object]]:
    return [e.detail for _, _, e in controller.store.recent(50) if e.event == "diagnosis"]


async def test_an_action_audits_the_lanes_top_finding_from_prometheus(controller: Controller) -> None:
    transport, asked = _prometheus(_queue_bound(kv=0.5))
    _with_why(controller, transport)
    await controller.service.handle(parse_notification(firing()))
    await controller.service.explained()
    (detail,) = _diagnoses(controller)
    assert detail["revision"] == 1 and detail["actions"] == ["shift"]
    assert detail["source"] == f"prometheus {URL} over 1m"
    findings = detail["findings"]
    assert isinstance(findings, list) and [f["check"] for f in findings] == ["queue/compute"]
    top = findings[0]
    assert top["title"] == "queue-bound on compute"
    assert top["explains"] == {"of": "ttft", "share": pytest.approx(2.4 / 2.5, abs=1e-4)}
    assert any(s["signal"].startswith("waiting") for s in top["evidence"])
    assert any('lane="slow"' in q and "[1m]" in q for q in asked)
    # `degrade status` says why
    text = status_text(controller.store.load(), controller.store.recent(20))
    assert "lane slow: shift 50% to fast" in text
    why = "  why: queue/compute: queue-bound on compute (explains 96% of TTFT); ttft p99 (SLO) 3, queue share"
    assert why in text


async def test_a_restore_takes_no_diagnosis(controller: Controller) -> None:
    transport, asked = _prometheus(_queue_bound(kv=0.5))
    _with_why(controller, transport)
    svc, clock = controller.service, controller.clock
    await svc.handle(parse_notification(firing()))
    await svc.explained()
    asked.clear()
    clock.now += 1
    await svc.handle(parse_notification(resolved()))
    clock.now += 20
    await svc.tick()
    await svc.explained()
    assert [e.event for _, _, e in controller.store.recent(20)][-1] == "restore"
    assert asked == [] and len(_diagnoses(controller)) == 1


async def test_a_down_prometheus_leaves_the_degrade_and_notes_why(controller: Controller) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    _with_why(controller, httpx.MockTransport(refuse))
    handled = await controller.service.handle(parse_notification(firing()))
    assert handled.changed and await controller.service.reconcile()
    assert controller.adapter.applied == [(1, SHIFT50)]
    await controller.service.explained()
    (detail,) = _diagnoses(controller)
    assert "connection refused" in str(detail["error"]) and "findings" not in detail
    text = status_text(controller.store.load(), controller.store.recent(20))
    assert "  why: no diagnosis (" in text and "connection refused" in text


async def test_a_hanging_prometheus_delays_nothing_and_times_out_into_a_note(controller: Controller) -> None:
    release, started = threading.Event(), threading.Event()

    def hang(request: httpx.Request) -> httpx.Response:
        started.set()
        release.wait(30)  # held until the test lets go: Prometheus never answers in time
        return httpx.Response(503)

    _with_why(controller, httpx.MockTransport(hang), timeout_s=0.3)
    try:
        t0 = time.monotonic()
        handled = await controller.service.handle(parse_notification(firing()))
        assert handled.changed and await controller.service.reconcile()
        acted_s = time.monotonic() - t0
        assert controller.adapter.applied == [(1, SHIFT50)]
        eventually(started.is_set, 10, "the diagnosis to ask Prometheus")
        assert _diagnoses(controller) == []  # the apply did not wait for it
        assert acted_s < 10  # (the hang lasts until released: acting did not wait on it)
        await controller.service.explained()
        (detail,) = _diagnoses(controller)
        assert detail["error"] == "Prometheus did not answer within 0.3 s"
        assert float(str(detail["elapsed_s"])) < 10
        # the next action while that thread still hangs starts no second one: a note at once
        controller.clock.now += 10
        await controller.service.tick()  # escalates: another action on the lane
        await controller.service.explained()
        assert (
            _diagnoses(controller)[-1]["error"]
            == "an earlier diagnosis of this lane still waits on Prometheus"
        )
        assert [t.name for t in threading.enumerate()].count("lanewatch-why-slow") == 1
    finally:
        release.set()


def test_serve_refuses_a_prometheus_that_is_not_a_url(tmp_path: Path) -> None:
    flags = ["--insecure-dev", "--gateway", "http://127.0.0.1:1", "--prometheus", "prom:9090"]
    done = CliRunner().invoke(app, ["degrade", "serve", *flags])
    assert done.exit_code == 2 and "--prometheus" in done.output


def test_serve_refuses_an_slo_spec_it_cannot_read(tmp_path: Path) -> None:
    flags = ["--insecure-dev", "--gateway", "http://127.0.0.1:1", "--prometheus", "http://127.0.0.1:9"]
    missing = tmp_path / "none.yaml"
    done = CliRunner().invoke(app, ["degrade", "serve", *flags, "--slo-spec", str(missing)])
    assert done.exit_code == 2 and "--slo-spec" in done.output


async def test_a_diagnosis_that_found_nothing_looks_once_more_while_the_lane_is_degraded(
    controller: Controller,
) -> None:
    answers = [
        {"findings": [], "found": 0},
        {"findings": [{"check": "queue/unsplit", "title": "t"}], "found": 1},
    ]

    async def why(lane: str) -> dict[str, object]:
        return answers.pop(0)

    c = controller
    c.service = DegradeService(
        POLICY, c.store, [c.adapter], c.metrics, clock=c.clock, why=why, diagnosis_retry_s=0.01
    )
    await c.service.handle(parse_notification(firing()))
    await c.service.explained()
    first, second = _diagnoses(c)
    assert first["found"] == 0 and "second_look" not in first
    assert second["second_look"] is True and second["found"] == 1 and second["actions"] == ["shift"]
    assert answers == []
