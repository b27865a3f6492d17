"""The demo's processes end with it: the supervisor's groups, Ctrl-C on `lanewatch demo`, and a
demo run where Prometheus and Alertmanager are missing (it says so and runs the rest)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lanewatch.collector.demo.supervisor import ChildExited, Supervisor
from tests.servers import lanewatch_command
from tests.waiting import eventually

pytestmark = pytest.mark.integration

# A child that starts a grandchild (in the child's process group) and prints the grandchild's pid.
PARENT_OF_SLEEPER = "; ".join(
    [
        "import subprocess, time",
        "p = subprocess.Popen(['sleep', '300'])",
        "print(p.pid, flush=True)",
        "time.sleep(300)",
    ]
)


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def children_of(pid: int) -> list[int]:
    """Pids whose parent is `pid`."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def test_shutdown_ends_children_and_their_children(tmp_path: Path) -> None:
    with Supervisor(grace_s=2.0) as sup:
        child = sup.start("parent", [sys.executable, "-c", PARENT_OF_SLEEPER], tmp_path / "parent.log")
        eventually(lambda: child.log_path.read_text().strip(), 20, "the grandchild's pid")
        grandchild = int(child.log_path.read_text().split()[0])
        assert os.getpgid(child.proc.pid) == child.proc.pid != os.getpgid(0)  # its own group
        assert alive(grandchild)
    assert child.proc.poll() is not None
    eventually(lambda: not alive(grandchild), 10, "the grandchild ended")


def test_check_names_a_child_that_exited_with_its_log(tmp_path: Path) -> None:
    with Supervisor() as sup:
        child = sup.start(
            "broken", [sys.executable, "-c", "print('port taken'); raise SystemExit(3)"], tmp_path / "b.log"
        )
        child.proc.wait(20)
        with pytest.raises(ChildExited, match=r"broken exited with status 3:\nport taken"):
            sup.check()


def test_children_die_with_a_killed_supervisor_process(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from lanewatch.collector.demo.supervisor import Supervisor
        sup = Supervisor()
        child = sup.start("sleeper", ["sleep", "300"], Path({str(tmp_path / "s.log")!r}))
        print(child.proc.pid, flush=True)
        time.sleep(300)
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        sleeper = int(owner.stdout.readline())
        assert alive(sleeper)
        owner.kill()  # no clean-up runs: PR_SET_PDEATHSIG must end the child
        owner.wait(10)
        eventually(lambda: not alive(sleeper), 10, "the orphan ended")
    finally:
        if owner.poll() is None:
            owner.kill()


def test_demo_without_prometheus_says_so_runs_the_rest_and_ctrl_c_ends_everything(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "PATH": str(tmp_path / "empty-path")}  # no prometheus, no alertmanager
    log = (tmp_path / "demo.log").open("w")
    demo = subprocess.Popen(
        [*lanewatch_command(), "demo", "--no-live", "--out", str(out), "--warmup", "600"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )

    def text() -> str:
        return (tmp_path / "demo.log").read_text()

    try:
        # A demo that ended (a child that could not start) fails here at once, with its log.
        eventually(
            lambda: "gateway http://" in text() or demo.poll() is not None, 120, "the stack up", context=text
        )
        assert demo.poll() is None, text()
        assert "prometheus and prometheus-alertmanager not found" in text()
        records = out / "records.jsonl"
        eventually(lambda: records.is_file() and records.read_text().count("\n") >= 5, 60, "records")
        kids = children_of(demo.pid)
        assert len(kids) == 5, kids  # two simulators, collector, gateway, controller; no Prometheus
        demo.send_signal(signal.SIGINT)
        assert demo.wait(60) == 130
    finally:
        if demo.poll() is None:
            demo.kill()
        log.close()
    assert not [pid for pid in kids if alive(pid)]
    assert "interrupted: every part stopped" in text()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True
    assert summary["missing_tools"] == ["prometheus", "prometheus-alertmanager"]
    assert summary["events"] == [] and summary["lanes"]
    assert (out / "report.html").is_file() and (out / "logs" / "gateway.log").is_file()
