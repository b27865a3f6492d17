"""What `gateway.workers` means for one worker: how many, its records file, its share of the series
budget, and the routes it serves through the supervisor (/metrics and PUT /admin/degrade).

The design (docs/gateway.md#workers): the supervisor process holds the one degrade state and
asks each worker for its page at a scrape; the workers serve everything else on their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.degrade_state.state import DegradeState, LaneDegrade
from lanewatch.collector.gateway.settings import GatewayConfig

from ..front.admin import checked_put, get_degrade, log_change, stale_refusal, state_response
from ..front.connection import FrontConn, Handler, Request, Response
from ..front.errors import error_response
from ..state import Gateway
from .control_channel import Link, LinkClosed, Message

__all__ = [
    "PUT_TIMEOUT_S",
    "SCRAPE_TIMEOUT_S",
    "SharedDegrade",
    "export_share",
    "logged_change",
    "records_path",
    "state_from_wire",
    "state_to_wire",
    "worker_count",
    "worker_routes",
]

SCRAPE_TIMEOUT_S = 10.0  # each worker's page; a worker later than this is left out of that scrape
ACK_TIMEOUT_S = 5.0  # a worker that has not applied a new degrade state by then is killed (restarted)
PUT_TIMEOUT_S = ACK_TIMEOUT_S + 10.0  # the worker's wait for the supervisor's answer to a PUT
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def worker_count(cfg: GatewayConfig) -> int:
    """`gateway.workers` as a number: "auto" is the cores this process may run on."""
    if cfg.workers == "auto":
        return max(1, len(os.sched_getaffinity(0)))
    return cfg.workers


def records_path(path: Path | None, slot: int, count: int) -> Path | None:
    """The records file of worker `slot` (1-based): `tap.jsonl` becomes `tap.worker2.jsonl`, so each
    file has one writer; a single process writes `path` itself."""
    if path is None or count == 1:
        return path
    return path.with_name(f"{path.stem}.worker{slot}{path.suffix}")


def export_share(export: ExportConfig, count: int) -> ExportConfig:
    """Each worker's series budget, 1/count of the gateway's: the merged page stays within it."""
    if count == 1:
        return export
    return export.model_copy(
        update={
            "max_series": max(1, export.max_series // count),
            "max_series_per_family": max(1, export.max_series_per_family // count),
        }
    )


def state_to_wire(state: DegradeState, seq: int) -> Message:
    """A degrade state as the supervisor sends it; `seq` orders the states it sent."""
    lanes = {lane: d.to_json() for lane, d in state.lanes.items()}
    return {"lanes": lanes, "version": state.version, "revision": state.revision, "seq": seq}


def state_from_wire(message: Message) -> DegradeState:
    """Inverse of `state_to_wire` (trusted: the supervisor validated it)."""
    lanes = {lane: LaneDegrade.from_json(d) for lane, d in message["lanes"].items()}
    return DegradeState(lanes, int(message["version"]), message["revision"])


class SharedDegrade:
    """A worker's copy of the supervisor's degrade state, applied to its gateway once built."""

    def __init__(self) -> None:
        self.seq = -1
        self.state = DegradeState()
        self.gw: Gateway | None = None

    def take(self, message: Message) -> None:
        """Take a state the supervisor sent, unless a later one was taken already."""
        seq = int(message["seq"])
        if seq <= self.seq:
            return
        self.seq, self.state = seq, state_from_wire(message)
        if self.gw is not None:
            self._apply(self.gw)

    def attach(self, gw: Gateway) -> None:
        """Apply the state to the worker's gateway, now and on every change."""
        self.gw = gw
        self._apply(gw)

    def _apply(self, gw: Gateway) -> None:
        gw.degrade = self.state
        gw.stats.degrade_version = self.state.version


def worker_routes(gw: Gateway, link: Link) -> Mapping[str, Mapping[str, Handler]]:
    """/metrics (the merged page) and PUT /admin/degrade (taken by the supervisor) for a worker."""

    async def metrics(_request: Request, _conn: FrontConn) -> Response:
        try:
            answer = await link.ask({"op": "scrape"}, SCRAPE_TIMEOUT_S + 5.0)
        except LinkClosed:
            return error_response(503, "the gateway is shutting down")
        return Response(200, str(answer["text"]).encode(), content_type=METRICS_CONTENT_TYPE)

    async def put(request: Request, _conn: FrontConn) -> Response:
        put = checked_put(gw, request)
        if isinstance(put, Response):
            return put
        lanes = {lane: d.to_json() for lane, d in put.lanes.items()}
        try:
            answer = await link.ask({"op": "put", "lanes": lanes, "revision": put.revision}, PUT_TIMEOUT_S)
        except LinkClosed:
            return error_response(503, "the gateway is shutting down; the degrade state is unchanged")
        if answer.get("stale"):
            return stale_refusal(gw, put.revision)
        return state_response(gw)  # every worker, this one too, took the state before the answer

    async def get(request: Request, conn: FrontConn) -> Response:
        return await get_degrade(gw, request, conn)  # every worker holds the same state

    return {"/metrics": {"GET": metrics}, "/admin/degrade": {"GET": get, "PUT": put}}


def logged_change(before: DegradeState, after: DegradeState, lane_order: list[str]) -> None:
    """Log a state change once (in the supervisor, not in every worker)."""
    if after.version != before.version:
        log_change(after, lane_order)
