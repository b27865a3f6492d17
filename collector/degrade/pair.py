"""One controller of a pair on a shared store: stand by, take the lead, lead until it is lost.

While standing by, the controller serves its HTTP edge (a notification waits in the inbox)
and campaigns for the lease. Once it leads, it loads the state the last leader committed,
notes the takeover in the audit log, re-applies the state to every router, drains the inbox
and runs as a lone controller would. When it cannot keep the lease it stops everything and
exits with LostLead: its supervisor starts it again as a standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections.abc import Callable

import uvicorn

from lanewatch.collector.common import secrets
from lanewatch.collector.common.errors import StartupError

from .leadership import Leadership, LeaseTimes, LostLead
from .metrics import DegradeMetrics
from .server import Front
from .service import DegradeService
from .settings import DegradeConfig, SharedStoreConfig
from .shared_store import Deposed, SharedStore, connect
from .state import AuditEntry
from .store import StateStore, StoreError
from .webhook import WebhookError, parse_notification

__all__ = ["LeadershipLost", "drain", "serve_pair"]

log = logging.getLogger("lanewatch.degrade")
DRAIN_BATCH = 100  # notifications taken from the inbox at a time


class LeadershipLost(StartupError):
    """The leader lost its lease: the process ends so that it starts again as a standby."""


async def serve_pair(
    cfg: DegradeConfig,
    shared: SharedStoreConfig,
    leading: Callable[[StateStore], DegradeService],
    metrics: DegradeMetrics,
    token: str | None,
    serving: Callable[[DegradeConfig, Front, DegradeMetrics, str | None], uvicorn.Server],
) -> None:
    """Serve as one of a pair until SIGINT or SIGTERM (LeadershipLost when the lead is lost)."""
    password = None
    if shared.password_file is not None:
        try:
            password = secrets.read_secret(shared.password_file, "shared_store.password_file")
        except ValueError as exc:
            raise StoreError(str(exc)) from None
    me = shared.name or f"{socket.gethostname()}:{os.getpid()}"
    url = shared.advertise_url or f"http://{cfg.server.host}:{cfg.server.port}"
    store = SharedStore(functools.partial(connect, shared.url, password, shared.timeout_s), me)
    leadership = Leadership(store, url, LeaseTimes(shared.lease_s, shared.renew_deadline_s, shared.retry_s))
    front = Front(leadership=leadership, inbox_max=shared.inbox_max)
    metrics.lead(lambda: front.role() == "leader")
    server = serving(cfg, front, metrics, token)
    stop = asyncio.Event()
    served = asyncio.create_task(server.serve())
    served.add_done_callback(lambda _: stop.set())
    service: DegradeService | None = None
    tasks: list[asyncio.Task[None]] = []
    lost: BaseException | None = None
    try:
        lease = await leadership.campaign(stop)
        if lease is None:
            return
        try:
            service = leading(store)
            detail = {"holder": me, "url": url, "term": lease.term, "revision": service.revision}
            store.append([AuditEntry(time.time(), "lead", None, None, detail)])
            service.resume()
        except (Deposed, StoreError) as exc:  # lost again before it could start leading
            lost = LostLead(str(exc))
        else:
            log.info("%s leads (term %d) from revision %d", me, lease.term, service.revision)
            front.service = service
            keep = asyncio.create_task(leadership.keep(stop))
            tasks = [
                keep,
                asyncio.create_task(service.run(stop, cfg.tick_s, cfg.reconcile_interval_s)),
                asyncio.create_task(drain(store, service, stop, cfg.tick_s)),
            ]
            await asyncio.wait([keep, served], return_when=asyncio.FIRST_COMPLETED)
            if keep.done() and not keep.cancelled():
                lost = keep.exception()
    finally:
        stop.set()
        server.should_exit = True
        await asyncio.gather(served, *tasks, return_exceptions=True)
        if service is not None:
            await service.shutdown()  # closes the store
        else:
            store.close()
    if isinstance(lost, LostLead):
        raise LeadershipLost(f"{me} lost the lead: {lost}; exiting, to start again as a standby")
    if lost is not None:
        raise lost


async def drain(store: SharedStore, service: DegradeService, stop: asyncio.Event, every_s: float) -> None:
    """Handle the notifications that waited in the inbox, oldest first, until `stop` is set."""
    while not stop.is_set():
        try:
            waiting = store.inbox(DRAIN_BATCH)
        except Exception as exc:
            log.warning("cannot read the inbox: %s", exc)
            waiting = []
        handled: list[int] = []
        try:
            for inbox_id, body in waiting:
                try:
                    notification = parse_notification(body)
                except WebhookError:  # checked before it was kept; dropped, not retried forever
                    log.error("inbox notification %d is not a valid notification: dropped", inbox_id)
                else:
                    await service.handle(notification)
                handled.append(inbox_id)
        except Deposed:
            return  # no longer the leader: keep() ends the lead, the next leader drains the rest
        except Exception as exc:  # the store failed mid-way: what was handled is dropped, the rest waits
            log.warning("could not handle an inbox notification: %s", exc)
        if handled:
            try:
                store.done(handled)
            except Exception as exc:  # handled again next time: decisions are idempotent
                log.warning("could not drop handled notifications from the inbox: %s", exc)
        if len(waiting) < DRAIN_BATCH:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)
