"""Processes on 127.0.0.1 for the degrade integration tests: free ports, start, wait, stop."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests import servers
from tests.servers import free_port, lanewatch_command

__all__ = ["free_port", "lanewatch_cmd", "output", "running", "wait_http"]


def lanewatch_cmd(*args: str) -> list[str]:
    """The `lanewatch` CLI of this environment, with `args`."""
    return [*lanewatch_command(), *args]


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Poll `url` until it answers 200; fail with the process's output if it exits first."""
    servers.wait_http(url, proc, lambda: output(proc), timeout)


def output(proc: subprocess.Popen[bytes]) -> str:
    """What the process wrote (it must have been started with stdout to a file)."""
    log = getattr(proc, "log_path", None)
    return Path(log).read_text(errors="replace") if log else ""


@contextmanager
def running(
    cmd: list[str], log_path: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`servers.started`, the log's path kept on the process for `output`."""
    with servers.started(cmd, log_path, env or {}) as proc:
        proc.log_path = str(log_path)  # type: ignore[attr-defined]
        yield proc
