"""Each router's read-back beside the desired state: verdicts, `GET /routers`, `degrade status` flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.adapters import AdapterError, RouterView
from lanewatch.collector.degrade.adapters.dry_run import DryRunAdapter
from lanewatch.collector.degrade.metrics import DegradeMetrics
from lanewatch.collector.degrade.readback import compare, exit_status, report_lines, reports_json, stale
from lanewatch.collector.degrade.server import Front, create_app
from lanewatch.collector.degrade.service import DegradeService
from lanewatch.collector.degrade.store import Store
from lanewatch.collector.degrade.webhook import parse_notification
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.alertmanager_bodies import encode, fixture
from tests.servers import free_port

from .conftest import POLICY, T0, Controller, RecordingAdapter

SHIFT = LaneDegrade(shift_to="fast", shift_percent=100)
CAP = LaneDegrade(cap_max_tokens=64)
TOKEN = "am-token-r3adback"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_a_router_holding_the_desired_lanes_is_in_sync_whatever_its_revision() -> None:
    r = compare("gateway", {"slow": SHIFT}, RouterView({"slow": SHIFT}, revision=3, version=9))
    assert (r.verdict, r.held, r.revision, r.version) == ("in_sync", {"slow": SHIFT}, 3, 9)
    assert compare("gateway", {}, RouterView({"slow": LaneDegrade()})).verdict == "in_sync"  # inactive


@pytest.mark.parametrize(
    "held", [{}, {"slow": CAP}, {"slow": LaneDegrade(shift_to="fast", shift_percent=50)}, {"fast": SHIFT}]
)
def test_a_router_holding_other_lanes_diverges(held: dict[str, LaneDegrade]) -> None:
    assert compare("gateway", {"slow": SHIFT}, RouterView(held)).verdict == "diverged"


def test_a_router_that_cannot_be_asked_is_stale_and_one_without_read_back_is_unreadable() -> None:
    assert stale("envoy", {"slow": SHIFT}, "refused").verdict == "stale"
    assert compare("webhook", {"slow": SHIFT}, None).verdict == "unreadable"


def test_the_report_shows_desired_beside_held_and_exits_3_on_a_divergence_or_a_stale_router() -> None:
    body = reports_json(
        7,
        [
            compare("a", {"slow": SHIFT}, RouterView({"slow": SHIFT}, revision=7)),
            compare("b", {"slow": SHIFT}, RouterView({"slow": CAP}, version=2)),
            stale("c", {}, "envoy admin http://127.0.0.1:9901: ConnectError"),
            compare("d", {"slow": SHIFT}, None),
        ],
    )
    assert report_lines(body) == [
        "routers (the controller is at revision 7):",
        "  router a: in sync: holds lane slow: shift 100% to fast (revision 7)",
        "  router b: DIVERGED: wants lane slow: shift 100% to fast; holds lane slow: cap max_tokens 64"
        " (no revision, version 2)",
        "  router c: STALE (cannot be read back: envoy admin http://127.0.0.1:9901: ConnectError);"
        " wants no degrade",
        "  router d: no read-back (the router cannot be asked); wants lane slow: shift 100% to fast",
    ]
    assert exit_status(body) == 3
    only_ok = reports_json(7, [compare("a", {}, RouterView()), compare("d", {}, None)])
    assert exit_status(only_ok) == 0


class _Broken(RecordingAdapter):
    async def read_back(self) -> RouterView | None:
        raise AdapterError("router http://127.0.0.1:9: ConnectError", retryable=True)


class _Silent(RecordingAdapter):
    async def read_back(self) -> RouterView | None:
        return None


async def test_the_service_reads_every_router_back_and_a_failing_one_is_stale(tmp_path: Path) -> None:
    dry, broken, silent = DryRunAdapter("dry"), _Broken("broken"), _Silent("silent")
    store = Store(tmp_path / "state")
    metrics = DegradeMetrics(CollectorRegistry(), ["dry", "broken", "silent"])
    service = DegradeService(POLICY, store, [dry, broken, silent], metrics, clock=lambda: T0)
    try:
        await service.handle(parse_notification(encode(fixture("firing"))))
        await dry.apply({"slow": CAP}, 1)  # not what the state wants: diverged
        reports = {r.adapter: r for r in await service.read_back()}
        assert reports["dry"].verdict == "diverged" and reports["dry"].revision == 1
        assert reports["dry"].desired == {"slow": LaneDegrade(shift_to="fast", shift_percent=50)}
        assert reports["broken"].verdict == "stale" and "ConnectError" in (reports["broken"].error or "")
        assert reports["silent"].verdict == "unreadable"
        await service.reconcile()
        assert {r.adapter: r.verdict for r in await service.read_back()}["dry"] == "in_sync"
    finally:
        store.close()


def test_get_routers_needs_the_token(controller: Controller) -> None:
    with TestClient(create_app(Front(controller.service), controller.metrics, TOKEN, 4096)) as c:
        assert c.get("/routers").status_code == 401
        r = c.get("/routers", headers=AUTH)
    assert r.status_code == 200
    assert r.json() == {
        "revision": 0,
        "routers": {
            "recording": {
                "verdict": "in_sync",
                "desired": {},
                "held": {},
                "revision": None,
                "version": None,
                "error": None,
            }
        },
    }


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "give --state-dir or --shared-store, --controller, or both"),
        (["--state-dir", "s", "--shared-store", "postgresql://x@h/db"], 2, "not both"),
        (["--shared-store", "mysql://x@h/db"], 2, "--shared-store: Value error, a postgresql:// URL"),
        (["--shared-store", "postgresql://x:hunter2@h/db"], 2, "holds a password"),
        (["--controller", "ftp://x"], 2, "--controller: 'ftp://x' must start with http"),
        (["--controller", "http://127.0.0.1:9", "--token-file", "/nonexistent/t"], 2, "--token-file"),
    ],
)
def test_status_refuses_bad_flags(args: list[str], code: int, message: str) -> None:
    done = runner.invoke(app, ["degrade", "status", *args])
    assert done.exit_code == code and message in done.stderr, done.output


def test_status_exits_1_when_the_controller_cannot_be_reached(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = runner.invoke(app, ["degrade", "status", "--controller", url])
    assert done.exit_code == 1
    assert f"cannot reach the controller at {url}: ConnectError" in done.stderr
