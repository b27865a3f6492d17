"""Child processes of the demo: each in its own process group, all ended together.

Every child starts in a new session (its own process group), so a terminal's Ctrl-C reaches
only the demo, which then ends the children in order: SIGTERM to each group, a grace period,
SIGKILL to what is left. On Linux each child also gets SIGKILL should the demo itself die
without cleaning up (PR_SET_PDEATHSIG), so no process outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from lanewatch.collector.common.errors import StartupError

__all__ = ["Child", "ChildExited", "Supervisor", "free_ports", "lanewatch_command"]

PR_SET_PDEATHSIG = 1
LOG_TAIL_BYTES = 2000


class ChildExited(StartupError, RuntimeError):
    """A child process ended while the demo still needed it; the message carries its log's tail."""


@dataclass
class Child:
    """One started process."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self) -> str:
        """The last lines the process wrote."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(max(0, self.log_path.stat().st_size - LOG_TAIL_BYTES))
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""


def lanewatch_command() -> list[str]:
    """How to run the `lanewatch` CLI of this interpreter's environment."""
    script = Path(sys.executable).parent / "lanewatch"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from lanewatch.collector.cli import main; main()"]


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that nothing listens on right now.

    Drawn below the kernel's ephemeral range: a port picked there and released could be taken
    as the source port of any outgoing connection on the machine before the child binds it (a
    busy machine opens thousands a second), and the child would then fail with EADDRINUSE.
    """
    low, high = _share(*_quiet_range(), os.environ.get(PORT_SHARE_ENV, ""))
    socks: list[socket.socket] = []
    try:
        for _ in range(count * 50):
            if len(socks) == count:
                break
            port = _RANDOM.randrange(low, high) if high > low else 0
            if port and port in _GIVEN:  # handed out lately, maybe not bound yet: draw again
                continue
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken: draw again
                s.close()
                continue
            socks.append(s)
        if len(socks) < count:
            raise OSError(f"no {count} free ports found in {low}-{high}")
        ports = [int(s.getsockname()[1]) for s in socks]
        _GIVEN.extend(ports)
        return ports
    finally:
        for s in socks:
            s.close()


# Several runs at once on one machine (the test suite's parallel workers) each take a slice of
# the quiet range: `k/n` is the k-th of n (0-based). Two runs drawing from one range would each
# find a port free that the other has handed out but not yet bound.
PORT_SHARE_ENV = "LANEWATCH_PORT_SHARE"


def _share(low: int, high: int, share: str) -> tuple[int, int]:
    """The `k/n` slice of [low, high); the whole range when share is empty; ValueError if malformed."""
    if not share or high <= low:
        return low, high
    k, sep, n = share.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and int(k) < int(n)):
        raise ValueError(f"{PORT_SHARE_ENV}={share!r} is not k/n with 0 <= k < n")
    width = (high - low) // int(n)
    if width < 100:
        raise ValueError(f"{PORT_SHARE_ENV}={share!r}: a slice of {low}-{high} would hold {width} ports")
    return low + int(k) * width, low + (int(k) + 1) * width


# Not the module-level random: a test that seeds it would make parallel workers draw alike.
_RANDOM = random.SystemRandom()
# Ports this process handed out lately: a caller that draws again before binding its last draw
# must not get the same port twice.
_GIVEN: deque[int] = deque(maxlen=512)
QUIET_FLOOR = 20000  # below: ports that services commonly claim (8080, 9090, 9093, ...)


def _quiet_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """[low, high): ports no connect() picks as a source port; (0, 0) where too few are left."""
    try:
        ephemeral_low = int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0, 0  # not Linux: the kernel's own pick
    if ephemeral_low - QUIET_FLOOR < 1000:
        return 0, 0
    return QUIET_FLOOR, ephemeral_low


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec function asking Linux to SIGKILL the child when the demo dies; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    libc = ctypes.CDLL(name, use_errno=True)

    def preexec() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    return preexec


class Supervisor:
    """Starts the demo's processes and ends every one of them on `shutdown` (or leaving the block)."""

    def __init__(self, grace_s: float = 5.0) -> None:
        self.children: list[Child] = []
        self.grace_s = grace_s
        self._preexec = _die_with_parent()

    def start(
        self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str | None] | None = None
    ) -> Child:
        """Start `argv` in its own process group with stdout and stderr to `log_path`; `env` adds to
        the demo's environment (a None value removes that variable)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self._preexec,  # only prctl: safe between fork and exec
                env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None},
            )
        child = Child(name, proc, log_path)
        self.children.append(child)
        return child

    def check(self) -> None:
        """Raise ChildExited when any child has ended."""
        for child in self.children:
            code = child.proc.poll()
            if code is not None:
                raise ChildExited(f"{child.name} exited with status {code}:\n{child.log_tail()}")

    def shutdown(self) -> None:
        """SIGTERM every child's group (last started first), wait the grace period, then SIGKILL."""
        live = [c for c in reversed(self.children) if c.proc.poll() is None]
        for child in live:
            _signal_group(child.proc, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        for child in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(max(0.0, deadline - time.monotonic()))
        for child in self.children:
            _signal_group(child.proc, signal.SIGKILL)  # also reaps stragglers a child left behind
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(5.0)

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the child's process group (its pid: it leads a new session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
