"""Records in through `POST /v1/records`, joined to spans: what the collector spends per record.

The collector runs as users run it (a subprocess with a config file, no probes, no
scrapes, the OTLP receiver and the join on). This process plays the gateway: it posts
tap records (status 200, a trace id, a 16-token answer with its 15 gaps) in batches of
the gateway's shipping size (gateway.batch_records, 256), and plays vLLM for half of them:
after each batch, one OTLP/HTTP protobuf export with the `llm_request` spans of every
other record (queue, prefill and decode attributes), so half the records join at once
and the other half wait out the join wait and leave unjoined. Every request is sent one
at a time on one kept-alive connection. The figure is records over the collector's user +
system CPU seconds (/proc/<pid>/stat) from the first batch to the last answer, with the
last join waits let run out.

Run alone: `python -m bench.ingest_cost [--records 20000]`.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from lanewatch.collector.collect import otlp
from lanewatch.collector.collect.otlp_wire import PROTOBUF
from lanewatch.collector.gateway.settings import ShippingConfig
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.timing import RequestTiming
from tests.servers import free_port

from .collector_cost import collector_process, collector_totals
from .machine import cpu_s

__all__ = ["flat_keys", "run_ingest_cost"]

BATCH = ShippingConfig().batch_records  # the gateway's shipping batch size
JOIN_WAIT_S = 1.0


def _record(i: int, trace_id: str) -> RequestTiming:
    gaps = tuple(0.010 + 0.0001 * (k % 7) for k in range(15))
    return RequestTiming(
        source="tap",
        target="gw",
        lane="fast" if i % 2 else "slow",
        request_class="short",
        model="m",
        api="chat",
        started_at=time.time(),
        request_id=f"req-{i}",
        trace_id=trace_id,
        status=200,
        ttfb_s=0.004,
        ttft_s=0.05 + 0.001 * (i % 10),
        e2e_s=0.2 + 0.001 * (i % 10),
        itl_s=gaps,
        prompt_tokens=20,
        output_tokens=16,
        tokens_from_usage=True,
    )


def _spans(trace_ids: list[str]) -> bytes:
    """One OTLP export with an `llm_request` span per trace id."""

    def kv(key: str, value: float) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(double_value=value))

    spans = [
        Span(
            trace_id=bytes.fromhex(tid),
            span_id=random.getrandbits(64).to_bytes(8, "big"),
            name=otlp.LLM_REQUEST_SPAN,
            attributes=[kv(otlp.ATTR_QUEUE, 0.001), kv(otlp.ATTR_PREFILL, 0.02), kv(otlp.ATTR_DECODE, 0.15)],
        )
        for tid in trace_ids
    ]
    req = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])])
    body: bytes = req.SerializeToString()
    return body


def _batches(count: int) -> list[tuple[bytes, bytes]]:
    """(records body, spans body) per batch, built before the clock starts."""
    out = []
    for start in range(0, count, BATCH):
        ids = [format(random.getrandbits(128) | 1, "032x") for _ in range(start, min(start + BATCH, count))]
        records = encode_batch(encode_record(_record(start + k, tid)) for k, tid in enumerate(ids))
        out.append((records, _spans(ids[::2])))
    return out


def _config() -> dict[str, Any]:
    return {
        "targets": [{"name": "gw", "url": "http://127.0.0.1:9", "model": "m"}],
        "probe": {"enabled": False},
        "scrape": {"enabled": False},
        "gpu": {"enabled": False},
        "otlp": {"join_wait_s": JOIN_WAIT_S},
    }


def run_ingest_cost(count: int, tmp: Path) -> dict[str, Any]:
    """Post `count` records (and spans for half) to a collector; its CPU per record."""
    batches = _batches(count)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with collector_process(tmp, _config(), port) as proc, httpx.Client(base_url=base, timeout=30) as client:
        warm_records, warm_spans = _batches(BATCH)[0]  # one batch first: imports and first-call costs
        client.post("/v1/records", content=warm_records, headers={"content-type": "application/json"})
        client.post("/v1/traces", content=warm_spans, headers={"content-type": PROTOBUF})
        time.sleep(JOIN_WAIT_S + 0.5)
        before, cpu0, t0 = collector_totals(port), cpu_s(proc.pid), time.monotonic()
        for records, spans in batches:
            r = client.post("/v1/records", content=records, headers={"content-type": "application/json"})
            r.raise_for_status()
            s = client.post("/v1/traces", content=spans, headers={"content-type": PROTOBUF})
            s.raise_for_status()
        sent_s = time.monotonic() - t0
        time.sleep(JOIN_WAIT_S + 0.5)  # the unjoined half leaves the join
        cpu, after = cpu_s(proc.pid) - cpu0, collector_totals(port)
    taken = after["requests"] - before["requests"]
    joined = after["joined"] - before["joined"]
    return {
        "records": count,
        "batch_records": BATCH,
        "records_counted": int(taken),
        "spans_joined": int(joined),
        "send_s": round(sent_s, 2),
        "cpu_s": round(cpu, 3),
        "cpu_us_per_record": round(1e6 * cpu / count, 1) if count else None,
        "records_per_core_s": round(count / cpu) if cpu else None,
    }


def flat_keys(r: dict[str, Any]) -> dict[str, float | None]:
    """The results.json keys of this part."""
    return {"ingest_records_per_core_s": r["records_per_core_s"]}


def main() -> None:
    """Run this part alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_ingest_cost(args.records, Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
