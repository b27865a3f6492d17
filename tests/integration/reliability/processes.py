"""lanewatch services as subprocesses on 127.0.0.1 for the reliability tests, and what they expose.

`service(...)` runs one `lanewatch <command>` with its output in a log file until the block
exits; `rss_kib` reads a process's resident memory; `samples` parses a /metrics page.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import lanewatch_command, started
from tests.waiting import eventually

START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Service:
    """A running lanewatch process."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        """Its /metrics page."""
        r = httpx.get(f"{self.url}/metrics", timeout=10)
        r.raise_for_status()
        return r.text

    def alive(self) -> None:
        """Fail with the log when the process has exited."""
        assert self.process.poll() is None, f"exited with {self.process.returncode}:\n{self.log()}"


@contextmanager
def service(
    args: list[str], port: int, log_path: Path, ready_path: str, env: dict[str, str] | None = None
) -> Iterator[Service]:
    """Run `lanewatch *args` listening on `port` until the block exits (SIGTERM, then SIGKILL)."""
    with started([*lanewatch_command(), *args], log_path, env or {}) as proc:
        svc = Service(f"http://127.0.0.1:{port}", proc, log_path)
        wait_ready(svc, ready_path)
        yield svc


def wait_ready(svc: Service, path: str) -> None:
    """Poll `path` until it answers (any status below 500)."""

    def answers() -> bool:
        svc.alive()
        try:
            return httpx.get(svc.url + path, timeout=1.0).status_code < 500
        except httpx.TransportError:
            return False

    eventually(answers, START_TIMEOUT_S, f"{svc.url}{path} answers", context=svc.log)


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    """Write a config file; returns its path."""
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def secret_file(folder: Path, name: str, value: str) -> Path:
    """A file holding one secret, readable by its owner only."""
    path = folder / name
    path.write_text(value + "\n")
    path.chmod(0o600)
    return path


def rss_kib(pid: int) -> int:
    """Resident memory of a process (VmRSS), KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample called `name` on a /metrics page, as (labels, value)."""
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out.append((dict(s.labels), s.value))
    return out


def errors_by_kind(text: str, **match: str) -> dict[str, float]:
    """lanewatch_request_errors_total summed per error_kind over samples whose labels match."""
    out: dict[str, float] = {}
    for labels, value in samples(text, "lanewatch_request_errors_total"):
        if all(labels.get(k) == v for k, v in match.items()):
            out[labels["error_kind"]] = out.get(labels["error_kind"], 0.0) + value
    return out
