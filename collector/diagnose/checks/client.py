"""Time the engine never saw: connection set-up, and the gap between client TTFT and the engine's phases.

DNS, connect and TLS are 0 on a reused connection, so their share of client TTFT is the cost of new
connections; the server closes idle keep-alive connections after its timeout, and a client that
pauses longer pays again. What is left of TTFT after send, queue and prefill (the residual) is the
front end (tokenization), a gateway, a client-side queue or the network.
"""

from __future__ import annotations

from lanewatch.collector.diagnose.checks.base import BaseCheck, explains, share_signal
from lanewatch.collector.diagnose.evidence import LaneEvidence, Window, need
from lanewatch.collector.diagnose.model import Finding, Fix, Signal
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["ConnectionSetup", "OutsideEngine"]

KEEPALIVE = "uvicorn's keep-alive default (5 s), used by vLLM's HTTP server"
CONNECTION_FIXES = (
    Fix(
        "a client connection pool with keep-alive",
        "requests reuse connections: no DNS, connect, TLS",
        KEEPALIVE,
    ),
    Fix(
        "a server keep-alive longer than the clients' idle gaps (uvicorn timeout_keep_alive)",
        "connections survive pauses between requests",
        KEEPALIVE,
    ),
    Fix("TLS session resumption", "a shorter handshake on a new connection", "RFC 8446 (TLS 1.3)"),
)
OUTSIDE_FIXES = (
    Fix("--api-server-count", "more front-end processes for tokenization and HTTP", "vLLM's tuning guide"),
    Fix("check the gateway and the client's own queue", "time spent before the engine", "the USE method"),
)


class ConnectionSetup(BaseCheck):
    """New connections (DNS, connect, TLS) are a large part of client TTFT."""

    id = "connection/setup"
    title = "connection set-up"
    explanation = (
        "DNS + connect + TLS a large share of client TTFT over its SLO; the share of requests after "
        "an idle gap longer than the server's keep-alive (uvicorn's 5 s default, which vLLM's HTTP "
        "server uses) that opened a new connection is shown. Fixes: a keep-alive pool, a longer "
        "server keep-alive, TLS session resumption."
    )
    needs = ("min_requests", "breakdown")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """DNS + connect + TLS share of TTFT high while the lane misses its TTFT SLO."""
        share = need(lane.stats.share(("dns", "connect", "tls"), "ttft"), "breakdown")
        held = share_signal("DNS + connect + TLS share of TTFT", share, thresholds.connection_share)
        idle = lane.stats.new_connections_after_idle
        after = f"new connections after idle gaps > {thresholds.keepalive_s:g} s"
        shown = [Signal.shown(after, idle)] if idle is not None else []
        summary = f"connection set-up is {share.value:.0%} of TTFT"
        evidence, ok = self.gate(lane, thresholds, held, summary, shown)
        if ok is not None:
            return ok
        after_idle = idle is not None and idle.value > 0.5
        why = " after idle gaps longer than the server's keep-alive" if after_idle else ""
        return self.found(
            lane,
            f"new connections{why} cost {share.value:.0%} of TTFT",
            evidence,
            explains("ttft", share),
            CONNECTION_FIXES,
        )


class OutsideEngine(BaseCheck):
    """Client TTFT far above the engine's queue + prefill: the front end, a gateway, the network."""

    id = "frontend/outside-engine"
    title = "outside the engine"
    explanation = (
        "client TTFT far above the engine's queue + prefill (vLLM counts TTFT from the front end's "
        "arrival, tokenization included): the front end, a gateway, a client queue or the network. "
        "Fixes: `--api-server-count` (vLLM's tuning guide), look at the gateway and the client."
    )
    needs = ("min_requests", "server_phases")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """The residual (TTFT - connection - send - queue - prefill) a large share of TTFT."""
        share = need(lane.stats.share(("send", "residual"), "ttft"), "server_phases")
        engine = need(lane.stats.share(("queue", "prefill"), "ttft"), "server_phases")
        held = share_signal("send + residual share of TTFT", share, thresholds.outside_share)
        shown = [Signal.shown("queue + prefill share of TTFT", engine)]
        summary = f"{share.value:.0%} of TTFT is outside the engine"
        evidence, ok = self.gate(lane, thresholds, held, summary, shown)
        if ok is not None:
            return ok
        return self.found(
            lane,
            f"{share.value:.0%} of TTFT passes outside the engine's queue and prefill "
            "(front end, gateway, client queue or network)",
            evidence,
            explains("ttft", share),
            OUTSIDE_FIXES,
        )
