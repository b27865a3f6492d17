"""Replacing a router's file whole, even when the writer is killed; finding the router's binary."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lanewatch.collector.degrade.adapters import AdapterError
from lanewatch.collector.degrade.adapters.envoy_render import parse_template, render, render_text
from lanewatch.collector.degrade.adapters.files import find_binary, run_command, write_atomic
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.layout import ROOT
from tests.waiting import eventually

WRITER = """
import sys
from pathlib import Path
from lanewatch.collector.degrade.adapters.files import write_atomic
target, texts = Path(sys.argv[1]), [Path(p).read_text() for p in sys.argv[2:]]
n = 0
while True:
    write_atomic(target, texts[n % 2])
    n += 1
    if n == 2:
        Path(str(target) + ".started").touch()
"""


def _renders(tmp_path: Path) -> list[Path]:
    """Two valid route files, padded so that each write takes a while."""
    t = parse_template((ROOT / "deploy" / "envoy" / "routes.template.yaml").read_text())
    states = [{}, {"slow": LaneDegrade(shift_to="fast", shift_percent=50, shed_classes=("batch",))}]
    out = []
    for i, lanes in enumerate(states):
        path = tmp_path / f"render-{i}.yaml"
        path.write_text(render_text(render(t, lanes)) + f"# {'x' * 200}\n" * 4000)
        out.append(path)
    return out


def _written(started: Path, proc: subprocess.Popen[bytes]) -> Callable[[], bool]:
    return lambda: started.exists() or proc.poll() is not None


def test_a_writer_killed_mid_loop_leaves_one_whole_file(tmp_path: Path) -> None:
    renders = _renders(tmp_path)
    texts = {p.read_text() for p in renders}
    target = tmp_path / "routes.yaml"
    rng = random.Random(7)
    for attempt in range(3):
        started = Path(str(target) + ".started")
        started.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target), *map(str, renders)])
        try:
            eventually(_written(started, proc), 30, "the writer's second write")
            assert proc.poll() is None, f"writer exited with {proc.returncode}"
            time.sleep(rng.uniform(0.0, 0.2))  # a random moment in the loop to kill at, not a wait
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        assert target.read_text() in texts, f"attempt {attempt}: a part-written route file"


def test_write_atomic_replaces_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "lanes.conf"
    write_atomic(target, "one\n")
    write_atomic(target, "two\n")
    assert target.read_text() == "two\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lanes.conf"]


def test_write_atomic_into_a_missing_folder_is_a_retryable_error(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="cannot write") as caught:
        write_atomic(tmp_path / "gone" / "lanes.conf", "x")
    assert caught.value.retryable


def test_find_binary_looks_beside_this_python_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    envoy = bin_dir / "envoy"
    envoy.write_text("#!/bin/sh\n")
    envoy.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_binary("envoy") == str(envoy)
    assert find_binary("no-such-router") is None


async def test_run_command_reports_status_and_output_and_times_out() -> None:
    assert await run_command(["/bin/sh", "-c", "echo bad config >&2; exit 3"], 10) == (3, "bad config")
    with pytest.raises(AdapterError, match=r"did not finish within 0\.2 s"):
        await run_command(["/bin/sh", "-c", "sleep 30"], 0.2)
    with pytest.raises(AdapterError, match="cannot run"):
        await run_command([str(Path("/nonexistent/nginx"))], 1)


async def test_an_nginx_apply_cancelled_by_its_deadline_mid_check_puts_the_include_back(
    tmp_path: Path,
) -> None:
    """The controller cancels an apply past its deadline: the unchecked include must not stay on
    disk (the next reload by anyone would load it), and the check must not outlive the apply."""
    from lanewatch.collector.degrade.adapters import NginxSettings

    include, pid = tmp_path / "lanes.conf", tmp_path / "check.pid"
    include.write_text("# the include nginx holds\n")
    settings = NginxSettings(
        include_file=include,
        check_command=["/bin/sh", "-c", f"echo $$ > {pid}; exec sleep 30"],
        reload_command=["/bin/true"],
        pid_file=None,
    )
    adapter = settings.build()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(1.0):
            await adapter.apply({"slow": LaneDegrade("fast", 50)}, 1)
    assert include.read_text() == "# the include nginx holds\n"
    check = int(pid.read_text())
    eventually(lambda: not _alive(check), 5, "the check command killed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().rsplit(")", 1)[1].split()[0] == "Z")
