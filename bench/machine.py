"""The machine the figures come from, and per-process CPU and memory read from /proc."""

from __future__ import annotations

import contextlib
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "ProxyProcess",
    "children",
    "cpu_s",
    "cpu_split",
    "machine_facts",
    "pin",
    "rss_mb",
    "runqueue_wait_s",
    "tool_versions",
]

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProxyProcess:
    """A proxy the bench started: its URL and its process (a master, a launcher or the proxy itself)."""

    url: str
    proc: subprocess.Popen[bytes]
    admin_url: str | None = None  # its admin interface, where it has one (Envoy's /stats)

    def pids(self) -> list[int]:
        """The process and its children (nginx workers, a launched binary): CPU counts for all."""
        return [self.proc.pid, *children(self.proc.pid)]


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc/*/stat: the kernel may lack .../children)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(stat.parent.name))
    return sorted(kids)


def cpu_s(*pids: int) -> float:
    """User + system CPU seconds used so far by these processes (a gone one counts 0)."""
    return sum(cpu_split(*pids))


def runqueue_wait_s(pid: int) -> float:
    """Seconds this process (its main thread) has waited, runnable, for a core (/proc/<pid>/schedstat)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return 0.0


def cpu_split(*pids: int) -> tuple[float, float]:
    """(user, system) CPU seconds used so far by these processes (a gone one counts 0)."""
    user = system = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        user += int(fields[11])
        system += int(fields[12])
    return user / _TICK, system / _TICK


def pin(pids: Iterable[int], cpus: set[int]) -> None:
    """Bind every thread of these processes to `cpus` (a gone one is skipped)."""
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(ProcessLookupError):  # a thread that just ended
                    os.sched_setaffinity(int(task.name), cpus)


def rss_mb(pid: int) -> tuple[float, float]:
    """(resident set now, its peak) of a process in MiB, from /proc/<pid>/status."""
    now = peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            now = int(line.split()[1]) / 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return now, peak


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine_facts() -> dict[str, Any]:
    """CPU model, cores, memory, kernel, Python, date and the load average now."""
    mem_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }


def part_facts(facts: dict[str, Any], started: float) -> dict[str, Any]:
    """When a part ran and under what load, from `machine_facts()` and `time.monotonic()` taken at
    its start: a part measured on its own and merged into a stored run keeps its own."""
    return {
        "date": facts["date"],
        "duration_s": round(time.monotonic() - started, 1),
        "load_avg_start": facts["load_avg"],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
    }


def tool_versions(nginx: str | None, alertmanager: str | None, blackbox: str | None = None) -> dict[str, str]:
    """nginx's, Alertmanager's and blackbox_exporter's versions (what the figures were measured against)."""
    out: dict[str, str] = {}
    tools = (("nginx", [nginx, "-v"]), ("Alertmanager", [alertmanager, "--version"]),
             ("blackbox_exporter", [blackbox, "--version"]))  # fmt: skip
    for name, cmd in tools:
        if cmd[0] is None:
            continue
        run = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=10, check=False)
        found = re.search(r"\d+\.\d+\.\d+", run.stderr + run.stdout)
        out[name] = found.group(0) if found else "?"
    return out
