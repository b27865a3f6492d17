"""`lanewatch gateway --workers N` (N > 1): the supervisor process and its N workers (worker_main.py).

The supervisor serves no request itself. It holds the port (bound, never listening, so the
workers' SO_REUSEPORT sockets can join it and nobody else's can), starts the workers, and
starts a worker that exits again, after a backoff (0.5 s doubling to 10 s; back to 0.5 s after
a minute up). It holds the one degrade state: a worker's PUT comes here, is checked against
the revision held, and is answered only once every worker has applied it (a worker that does
not within ACK_TIMEOUT_S is killed first, and comes back with the state), so every request
after the answer sees it. At a scrape it asks every worker for its page and merges them
(exporters/page_merge.py), adding what exited workers had counted. SIGTERM or SIGINT: each
worker stops accepting and drains; the supervisor waits for them all, then exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.common.errors import StartupError
from lanewatch.collector.degrade_state.state import DegradeState, LaneDegrade, is_stale
from lanewatch.collector.gateway.settings import GatewayConfig

from .control_channel import Link, LinkClosed, Message
from .per_worker import ACK_TIMEOUT_S, SCRAPE_TIMEOUT_S, logged_change, state_to_wire

__all__ = ["Supervisor", "bind_port"]

log = logging.getLogger("lanewatch.gateway.workers")
Merge = Callable[[list[str], list[str]], str]  # (workers' pages, exited workers' pages) -> one page
RESTART_MIN_S, RESTART_MAX_S, STABLE_S = 0.5, 10.0, 60.0
START_TIMEOUT_S = 120.0  # a worker's start, its first round of learning lanes' models included
STOP_MARGIN_S = 10.0  # past the drain timeout, a worker still running at shutdown is killed


@dataclass(slots=True)
class Slot:
    """One worker's place: the process in it now and what the supervisor knows of it."""

    index: int  # 1-based
    process: asyncio.subprocess.Process | None = None
    link: Link | None = None
    hello: bool = False  # asked for its settings: sent every state change from then on
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    failed: str | None = None
    last_page: str | None = None  # the last /metrics page this process rendered
    started: float = 0.0


def bind_port(host: str, port: int) -> socket.socket:
    """Bind (not listen) the gateway's port with SO_REUSEPORT; OSError when it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class Supervisor:
    """Starts, restarts and stops the workers; holds the degrade state; merges /metrics."""

    def __init__(
        self,
        cfg: GatewayConfig,
        export: ExportConfig,
        records: Path | None,
        count: int,
        port: int,
        merge: Merge,
    ) -> None:
        self.cfg, self.export, self.records, self.port = cfg, export, records, port
        self._merge = merge  # exporters/page_merge.py merge_pages, handed over by the wiring (serve.py)
        self.slots = [Slot(i) for i in range(1, count + 1)]
        self.state = DegradeState()
        self.seq = 0  # orders the states sent: a worker never goes back to an older one
        self.retired = ""  # counters and histograms of workers that exited, as one page
        self.stopping = False
        self._lock = asyncio.Lock()  # one PUT at a time
        self._keepers: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start every worker and wait until each listens; StartupError (one line) if one cannot."""
        for slot in self.slots:
            await self._spawn(slot)
        for slot in self.slots:
            error = await self._started(slot)
            if error is not None:
                await self.shutdown()
                raise StartupError(error)
        self._keepers = [asyncio.create_task(self._keep(slot)) for slot in self.slots]
        for slot in self.slots:
            self._log_listening(slot)

    @staticmethod
    def _log_listening(slot: Slot) -> None:
        pid = slot.process.pid if slot.process is not None else 0
        log.info("worker %d (pid %d) listening", slot.index, pid)

    async def shutdown(self) -> None:
        """Ask every worker to drain and exit; kill those still running past the drain timeout."""
        self.stopping = True
        for task in self._keepers:
            task.cancel()
        running = [s.process for s in self.slots if s.process is not None and s.process.returncode is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        waits = [asyncio.create_task(p.wait()) for p in running]
        if waits:
            _done, late = await asyncio.wait(waits, timeout=self.cfg.drain_timeout_s + STOP_MARGIN_S)
            for proc in running:
                if proc.returncode is None:
                    log.warning("worker pid %d did not stop in time; killed", proc.pid)
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
            await asyncio.gather(*late, return_exceptions=True)
        for slot in self.slots:
            if slot.link is not None:
                slot.link.close()

    # ------------------------------------------------------------------ processes
    async def _spawn(self, slot: Slot) -> None:
        parent, child = socket.socketpair()
        with child:
            slot.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "lanewatch.collector.gateway.processes.worker_main",
                str(child.fileno()),
                pass_fds=(child.fileno(),),
            )
        slot.hello, slot.failed, slot.started = False, None, time.monotonic()
        slot.ready = asyncio.Event()
        slot.link = await Link.over(parent, partial(self._answer, slot))

    async def _started(self, slot: Slot) -> str | None:
        """None once the worker in `slot` listens; else why it could not start."""
        assert slot.process is not None
        exited = asyncio.create_task(slot.process.wait())
        ready = asyncio.create_task(slot.ready.wait())
        await asyncio.wait({exited, ready}, timeout=START_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        ready.cancel()
        if slot.failed is not None:
            return slot.failed
        if slot.ready.is_set():
            return None
        code = slot.process.returncode
        if code is None:
            return f"worker {slot.index} did not start within {START_TIMEOUT_S:g} s"
        return f"worker {slot.index} exited with status {code} before it listened"

    async def _keep(self, slot: Slot) -> None:
        """Start the worker in `slot` again whenever it exits, with a growing backoff."""
        delay = RESTART_MIN_S
        while not self.stopping:
            assert slot.process is not None
            code = await slot.process.wait()
            self._retire(slot)
            if self.stopping:
                return
            if time.monotonic() - slot.started > STABLE_S:
                delay = RESTART_MIN_S
            log.warning(
                "worker %d (pid %d) exited with status %s; starting it again in %.1f s",
                slot.index,
                slot.process.pid,
                code,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RESTART_MAX_S)
            if not self.stopping:
                await self._spawn(slot)

    def _retire(self, slot: Slot) -> None:
        """A worker exited: what it had counted stays in the sums (its gauges go)."""
        if slot.link is not None:
            slot.link.close()
        slot.link, slot.hello = None, False
        if slot.last_page:
            self.retired = self._merge([], [self.retired, slot.last_page])
        slot.last_page = None

    async def _kill(self, slot: Slot, why: str) -> None:
        """Kill the worker in `slot` and wait until it is gone (it is started again)."""
        proc = slot.process
        if proc is None or proc.returncode is not None:
            return
        log.error(
            "worker %d (pid %d) %s; killed so it cannot serve an old degrade state", slot.index, proc.pid, why
        )
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()

    # ------------------------------------------------------------------ questions from workers
    async def _answer(self, slot: Slot, message: Message) -> Message:
        op = message.get("op")
        if op == "hello":
            return self._hello(slot)
        if op == "ready":
            slot.ready.set()
            if self._keepers:  # started again; the first start is logged once all listen
                self._log_listening(slot)
            return {}
        if op == "failed":
            slot.failed = str(message.get("error"))
            if self._keepers:  # at the first start the error is the gateway's one line instead
                log.error("worker %d could not start: %s", slot.index, slot.failed)
            return {}
        if op == "put":
            return await self._put(message)
        if op == "scrape":
            return {"text": await self._scrape()}
        return {"error": f"unknown op {op!r}"}

    def _hello(self, slot: Slot) -> Message:
        """The worker's settings and the state now; from here on it is sent every change."""
        slot.hello = True  # in the same step as reading the state: no change falls between
        return {
            "config": self.cfg.model_dump(mode="json"),
            "export": self.export.model_dump(mode="json"),
            "records": str(self.records) if self.records is not None else None,
            "slot": slot.index,
            "count": len(self.slots),
            "port": self.port,
            "state": state_to_wire(self.state, self.seq),
        }

    async def _put(self, message: Message) -> Message:
        """Take a PUT a worker checked: refused when older than the revision held, else applied by
        every worker before the answer."""
        async with self._lock:
            revision = message.get("revision")
            if is_stale(self.state, revision):
                return {"stale": True, "revision": self.state.revision}
            lanes = {lane: LaneDegrade.from_json(d) for lane, d in message["lanes"].items()}
            before, self.state = self.state, self.state.replaced(lanes, revision)
            self.seq += 1
            targets = [s for s in self.slots if s.hello and s.link is not None]  # same step as the change
            logged_change(before, self.state, self.cfg.ordered_lanes)
            sent = {"op": "state", **state_to_wire(self.state, self.seq)}
            results = await asyncio.gather(
                *(self._ask(s, sent, ACK_TIMEOUT_S) for s in targets), return_exceptions=True
            )
            for slot, result in zip(targets, results, strict=True):
                if isinstance(result, BaseException):
                    await self._kill(slot, f"did not take degrade state v{self.state.version}")
            return {"ok": True}

    async def _scrape(self) -> str:
        """Every worker's page merged, with the counts of workers that exited."""
        live = [s for s in self.slots if s.ready.is_set() and s.link is not None]
        results = await asyncio.gather(
            *(self._ask(s, {"op": "render"}, SCRAPE_TIMEOUT_S) for s in live), return_exceptions=True
        )
        pages: list[str] = []
        for slot, result in zip(live, results, strict=True):
            if isinstance(result, BaseException) or "text" not in result:
                page = slot.last_page  # late or gone: its last page keeps its counters from dropping
            else:
                page = slot.last_page = str(result["text"])
            if page:
                pages.append(page)
        retired = [self.retired] if self.retired else []
        return await asyncio.to_thread(self._merge, pages, retired)

    @staticmethod
    async def _ask(slot: Slot, message: Message, timeout_s: float) -> Message:
        if slot.link is None:
            raise LinkClosed("no worker")
        return await slot.link.ask(message, timeout_s)


async def run_supervised(
    cfg: GatewayConfig,
    export: ExportConfig,
    records: Path | None,
    count: int,
    merge: Merge,
    banner: Callable[[int], None],
) -> None:
    """Serve with `count` workers until SIGINT or SIGTERM; StartupError for a taken port or a worker
    that cannot start. `banner` is told the port once every worker listens."""
    from .serve import until_signalled

    host = cfg.server.host
    try:
        held = bind_port(host, cfg.server.port)
    except OSError as exc:
        raise StartupError(f"cannot listen on {host}:{cfg.server.port}: {exc.strerror or exc}") from None
    with held:
        supervisor = Supervisor(cfg, export, records, count, int(held.getsockname()[1]), merge)
        signalled = asyncio.create_task(until_signalled())
        try:
            await supervisor.start()
            banner(supervisor.port)
            await signalled
        finally:
            signalled.cancel()
            await supervisor.shutdown()
