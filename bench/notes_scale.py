"""The prose for the collector-at-scale parts of results.md: how each measures, where the time goes.

As in notes.py, texts per goal come in pairs (when met, when not met); `{key}` fields are
filled from results.json (`?` when missing).
"""

from __future__ import annotations

from typing import Any

__all__ = ["SCALE_NOTES"]

_PROBE_PROFILE = (
    "Where a probe's CPU goes (cProfile over 200 probes back to back against the simulator, 16 "
    "tokens each, in one process; py-spy on `lanewatch collect` at 10 probes/s agrees on the "
    "order): reading the streamed body through httpx, httpcore, h11 and anyio, one pass per "
    "read, ~20 reads an answer (~30 %); writing the request, headers and body as separate h11 "
    "events and socket writes (~30 %); the SSE parse and one JSON decode per event (~14 %); "
    "the client span with its six phase children, built and dropped when no exporter is "
    "configured (~10 %); httpx building the request (~7 %); closing the response (~5 %). The "
    "collector idle (join expiry, the HTTP server) costs 6 ms of CPU a second, 0.6 ms per probe "
    "at 10 probes/s; receiving the simulator's spans and joining them is a few % of the samples. "
    "Removed: the span when no exporter is configured (a W3C traceparent with a random trace id "
    "still goes out, so the server span still joins), httpx's client around httpcore's pool "
    "(the prober sends httpcore requests itself: one request model, one response model and three "
    "generator layers less per read), one stop waiter per schedule instead of one per probe. "
    "Each target already had one connection pool and one TLS context. Every phase is still "
    "measured. Measured side by side with the machine loaded (load average 20-25 on 2 cores): "
    "5.43-5.47 ms per probe before, 4.56-4.62 after, blackbox_exporter 2.9-3.4 in the same runs; "
    "in one warm process, 1.66-1.79 ms before and 1.50 after. Cold caches on a loaded machine "
    "multiply the Python path by ~3 (as in the tap's notes); blackbox_exporter, compiled Go, "
    "loses less to them. What is left is Python per read and per request in httpcore and h11, "
    "and the collector's costs per second shared by 10 probes a second (the window's summary for "
    "/metrics, refreshed once a second and held under a tenth of a core; join expiry; the idle "
    "loop): a later run at load average 7 read 6.83 ms against blackbox_exporter's 4.2. At 50 "
    "probes/s over 500 targets (the fleet part) a probe cost 1.1 ms."
)

SCALE_NOTES: dict[str, Any] = {
    "why": {
        "probe_cost": (
            "lanewatch's whole probe (timing, SSE parsing, the join, the window and the metrics) costs "
            "{probe_cpu_ms_per_probe:.2f} ms of CPU against blackbox_exporter's "
            "{blackbox_cpu_ms_per_probe:.2f} ms for a probe that reads the stream and checks its end.",
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
            "A 256-record batch is one pydantic validation of the JSON, then per record the join, "
            "the window and the metrics.",
            "Per record the collector validates the JSON (pydantic), joins, adds to the window and "
            "updates the histograms; {ingest_records_per_core_s:.0f} records/s per core here.",
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
