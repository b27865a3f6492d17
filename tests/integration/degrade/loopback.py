"""Processes on 127.0.0.1 for the degrade integration tests: free ports, start, wait, stop."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lanewatch_cmd(*args: str) -> list[str]:
    """The `lanewatch` CLI of this environment."""
    script = Path(sys.executable).with_name("lanewatch")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from lanewatch.collector.cli import main; main()", *args]


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    """Poll `url` until it answers 200; fail with the process's output if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"process exited with {proc.returncode}:\n{output(proc)}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{url} not up within {timeout} s")


def output(proc: subprocess.Popen[bytes]) -> str:
    """What the process wrote (it must have been started with stdout to a file)."""
    log = getattr(proc, "log_path", None)
    return Path(log).read_text(errors="replace") if log else ""


@contextmanager
def running(
    cmd: list[str], log_path: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `cmd` with output to `log_path`; SIGTERM (then SIGKILL) it at the end."""
    log = open(log_path, "ab")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    proc.log_path = str(log_path)  # type: ignore[attr-defined]
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
