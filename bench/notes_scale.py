"""The prose for the collector-at-scale parts of results.md: how each measures, where the time goes.

As in notes.py, texts per goal come in pairs (when met, when not met); `{key}` fields are
filled from results.json (`?` when missing).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCALE_NOTES"]

_PROBE_PROFILE = (
    "Where a probe's CPU went (py-spy on `lanewatch collect` at 10 probes/s against the "
    "simulator, 16 tokens an answer, ~20 reads): reading the streamed body through httpcore, h11 "
    "and anyio, a coroutine hop per read (~25 % of samples); asyncio's loop and its syscalls "
    "(~25 %); receiving the simulator's spans through FastAPI (~9 %); the window's quantiles "
    "summarised for /metrics every second whether or not anyone scraped (~7 %); the SSE parse "
    "(~5 %). Removed: the prober now sends on the gateway's bare-asyncio HTTP/1.1 connection "
    "(collector/http1/client.py), whose read callback stamps and parses each read with no "
    "task switch; `collect` and `probe` run on uvloop, as the gateway does; the window is "
    "summarised when a scrape asks, at most once a second. Removed before: the client span when "
    "no exporter is configured (a W3C traceparent still goes out, so the server span still "
    "joins) and httpx's client. Every phase is still measured. Side by side, one run each, load "
    "average ~1: 6.49 ms per probe before (blackbox_exporter 4.27), 5.71 with uvloop and the "
    "window on demand, 3.04 on the new connection (blackbox_exporter 3.85). blackbox_exporter opens "
    "a new connection per probe; with `probe.connection: cold` lanewatch does too, and one such run "
    "read 3.17 ms against blackbox_exporter's 3.70. What is left (py-spy again, half the samples "
    "of before): the event loop and its syscalls (~32 %), receiving the simulator's spans through "
    "uvicorn and FastAPI (~18 %), the read path with its SSE parse (~18 %, the parse ~11 %), the "
    "probe's own request, record and schedule (~9 %)."
)

SCALE_NOTES: dict[str, Any] = {
    "why": {
        "probe_cost": (
            "lanewatch's whole probe (timing, SSE parsing, the join, the window and the metrics) costs "
            "{probe_cpu_ms_per_probe:.2f} ms of CPU against blackbox_exporter's "
            "{blackbox_cpu_ms_per_probe:.2f} ms for a probe that reads the stream and checks its end. "
            + _PROBE_PROFILE,
            "{probe_cpu_ms_per_probe:.2f} ms against blackbox_exporter's {blackbox_cpu_ms_per_probe:.2f}. "
            + _PROBE_PROFILE,
        ),
        "scrape_parse": (
            "Sample lines in vLLM's plain form are taken apart by one regular expression and their "
            "label sets parsed once per distinct set; any other line goes to prometheus_client's parser. "
            "Tests hold every sample of the captured pages to prometheus_client's result.",
            "The filter keeps ~180 of ~450 lines and each costs a few µs; the rest is grouping "
            "histogram buckets by label set. On a loaded machine the median moves with the load.",
        ),
        "ingest": (
            "A 256-record batch is parsed by the json module and each record built and type-checked "
            "in C (msgspec, collector/record/codec.py), then per record the join, the window and the "
            "metrics.",
            "Per record the collector builds and checks the record (msgspec), joins, adds to the "
            "window and updates the histograms; {ingest_records_per_core_s:.0f} records/s per core here.",
        ),
        "fleet_cpu": (
            "Probing and scraping 1,000 targets take {fleet_1000_cpu_cores:.2f} of a core; the cost "
            "grows with the targets (the per-target column of the fleet table).",
            "{fleet_1000_cpu_cores:.2f} cores at 1,000 targets: the per-probe cost times 100 probes/s "
            "plus the per-scrape cost times 67 scrapes/s.",
        ),
        "fleet_rss": (
            "Per target: one connection pool, one scrape window, and the metrics' series.",
            "Per target: one connection pool, one scrape window, and the metrics' series.",
        ),
        "fleet_delay": (
            "Probes start within {fleet_1000_start_delay_p99_ms:.0f} ms of their due time at p99.",
            "Start delay is wall-clock: on a shared machine, a collector that waits for a core starts "
            "its probes late, whatever its own cost. Rendering /metrics holds the event loop for the "
            "whole render (see the fleet table's /metrics column): a Prometheus scrape of a collector "
            "with many targets delays every probe due meanwhile.",
        ),
    },
    "probecost_method": (
        "The simulator's streamed chat endpoint, the `short` class's body (12 words in, 16 tokens out, "
        "usage on), 10 probes a second for each prober, one after the other in the same run: "
        "`lanewatch collect` (ten targets, one simulator, scrapes off, the simulator's spans sent to it "
        "and joined) and Debian's blackbox_exporter (an http module POSTing the same body and failing "
        "without `data: [DONE]`; this process calls its /probe as Prometheus would, so its figure "
        "includes its own /probe handling). CPU is each process's user + system over its window "
        "(/proc/<pid>/stat) per successful probe. blackbox_exporter opens a new connection per probe; "
        "lanewatch keeps one warm per target (its default)."
    ),
    "ingest_method": (
        "`lanewatch collect` without probes or scrapes, the join on (1 s wait). This process posts "
        "gateway tap records (status 200, a trace id, 16 tokens and their 15 gaps) in batches of the "
        "gateway's shipping size, and after each batch an OTLP/HTTP protobuf export with `llm_request` "
        "spans for every other record, one request at a time on one connection; CPU is the "
        "collector's over the whole send and the last join waits."
    ),
    "fleet_method": (
        "bench/fleet_upstream.py: one process listening on one 127.0.0.1 port per target, each "
        "streaming a 16-token answer (first chunk at 50 ms, then every 10 ms) and serving a captured "
        "445-line vLLM /metrics page. `lanewatch collect` with every target, CPU over the window after "
        "a warm-up past the first probe interval; start delay is the lanewatch_probe_start_delay_seconds "
        "histogram since start (p99 interpolated within its bucket), read with one /metrics render "
        "after the CPU window, whose size, answer time and CPU are the last column. The request "
        "metrics cap label values at export.max_label_values (200 by default), so past 200 targets "
        "further targets share the `__overflow__` series; a collector meant for more targets raises "
        "it, and its /metrics grows with it."
    ),
}
