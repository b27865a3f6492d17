"""Each adapter's last apply and last error: recorded by the controller, shown by `degrade status`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.degrade.store import Store
from lanewatch.collector.degrade.webhook import parse_notification
from tests.alertmanager_bodies import alert, body, encode

from .conftest import T0, Controller

runner = CliRunner()


def _status(state_dir: Path, *flags: str) -> str:
    done = runner.invoke(app, ["degrade", "status", "--state-dir", str(state_dir), *flags])
    assert done.exit_code == 0, done.output
    return done.stdout


async def test_status_shows_per_adapter_what_was_applied_when_and_the_last_error(tmp_path: Path) -> None:
    c = Controller(tmp_path / "state")
    try:
        assert await c.service.reconcile()  # no degrade yet: applied once
        writes = c.store.adapters()["recording"]
        assert await c.service.reconcile()  # unchanged: nothing new recorded
        assert c.store.adapters()["recording"] == writes
        await c.service.handle(parse_notification(encode(body(alert("firing", starts=T0)))))
        c.clock.now += 5
        c.adapter.fail = True
        assert not await c.service.reconcile()
        text = _status(tmp_path / "state")
        assert "adapter recording: applied revision 0 at 2027-01-15T08:00:00Z (no degrade)" in text
        assert "last error at 2027-01-15T08:00:05Z (failing now): router unreachable" in text
        c.clock.now += 5
        c.adapter.fail = False
        assert await c.service.reconcile()
    finally:
        c.store.close()
    text = _status(tmp_path / "state")
    assert (
        "adapter recording: applied revision 1 at 2027-01-15T08:00:10Z (degraded lanes slow); "
        "last error at 2027-01-15T08:00:05Z (since recovered): router unreachable"
    ) in text
    report = json.loads(_status(tmp_path / "state", "--json"))["adapters"]["recording"]
    assert report["applied_revision"] == 1 and report["lanes"]["slow"]["shift_percent"] == 50
    assert report["error"] == "router unreachable" and report["error_at"] == T0 + 5


def test_a_state_dir_from_before_adapter_reports_shows_none(tmp_path: Path) -> None:
    store = Store(tmp_path)
    store._db.execute("DROP TABLE adapter")  # as an older lanewatch left it
    store.close()
    ro = Store(tmp_path, readonly=True)
    try:
        assert ro.adapters() == {}
    finally:
        ro.close()
    assert "adapter " not in _status(tmp_path)
