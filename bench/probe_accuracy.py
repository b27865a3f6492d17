"""How exact is the prober? Its TTFT against the simulator's ground truth, and its connect
and TLS times against `curl -w`, over many sequential probes on loopback.

    .venv/bin/python -m bench.probe_accuracy [--probes 400] [--out bench/probe_accuracy.json]

TTFT error = client TTFT − (dns + connect + tls) − the simulator's true ttft_s (arrival to
first content chunk handed to the socket). It holds the request's send, the server's
parsing before its handler runs, and the loopback trip back. The load average is
recorded beside the figures: on a shared 2-core machine it moves the tails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from lanewatch.collector.config import Target
from lanewatch.collector.probe import Prober, ProbeSpec
from lanewatch.collector.timing import RequestTiming, breakdown
from lanewatch.collector.window import summarize
from tests.servers import SimHandle, start_simulator


def _spec(i: int) -> ProbeSpec:
    return ProbeSpec("short", "chat", 4, prompt=f"bench probe {i}")


async def _probe(target: Target, connection: str, n: int) -> list[RequestTiming]:
    async with Prober(target, connection="cold" if connection == "cold" else "warm") as p:
        return [await p.probe(_spec(i)) for i in range(n)]


def _ttft_errors(sim: SimHandle, records: list[RequestTiming]) -> dict[str, Any]:
    errors, token_mismatch, sum_gap = [], 0, 0.0
    with sim.client() as c:
        for r in records:
            truth = c.get(f"/debug/requests/{r.request_id}").json()
            conn = (r.dns_s or 0) + (r.connect_s or 0) + (r.tls_s or 0)
            errors.append((r.ttft_s or 0) - conn - truth["ttft_s"])
            token_mismatch += r.output_tokens != truth["output_tokens"]
            sum_gap = max(sum_gap, abs(sum(breakdown(r).values()) - (r.e2e_s or 0)))
    s = summarize(errors)
    assert s is not None
    return {
        "probes": len(records),
        "failed": sum(1 for r in records if not r.ok),
        "ttft_err_ms": {k: round(getattr(s, k) * 1e3, 3) for k in ("p50", "p90", "p95", "p99", "min", "max")},
        "token_mismatches": token_mismatch,
        "breakdown_max_gap_ms": round(sum_gap * 1e3, 4),
    }


def _curl(url: str, cacert: str, n: int) -> list[tuple[float, float]]:
    fmt = "%{time_namelookup} %{time_connect} %{time_appconnect}\\n"
    args = ["curl", "-s", "--cacert", cacert, "--no-sessionid", "-H", "Connection: close", "-w", fmt]
    for _ in range(n + 1):
        args += [f"{url}/health", "-o", "/dev/null"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True).stdout
    rows = [[float(x) for x in line.split()] for line in out.splitlines() if line.strip()]
    return [(c - nl, a - c) for nl, c, a in rows[1:]]  # the first also builds curl's TLS context


async def _versus_curl(sim: SimHandle, rounds: int, per_round: int) -> dict[str, Any]:
    url = sim.url.replace("127.0.0.1", "localhost")
    target = Target(name="sim", url=url, model=sim.model, cacert=sim.cert_path)
    ours: list[RequestTiming] = []
    theirs: list[tuple[float, float]] = []
    async with Prober(target, connection="cold") as p:
        for _ in range(rounds):
            theirs += await asyncio.to_thread(_curl, url, str(sim.cert_path), per_round)
            ours += [await p.probe(_spec(i)) for i in range(per_round)]

    def ms(values: list[float]) -> float:
        return round(statistics.median(values) * 1e3, 3)

    return {
        "samples": len(ours),
        "probe_connect_ms": ms([r.connect_s or 0 for r in ours]),
        "curl_connect_ms": ms([c for c, _ in theirs]),
        "probe_tls_ms": ms([r.tls_s or 0 for r in ours]),
        "curl_tls_ms": ms([t for _, t in theirs]),
        "probe_dns_ms": ms([r.dns_s or 0 for r in ours]),
    }


def main() -> None:
    """Run the accuracy benchmark and write its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probes", type=int, default=400)
    ap.add_argument("--out", type=Path, default=Path("bench/probe_accuracy.json"))
    args = ap.parse_args()
    results: dict[str, Any] = {"load_avg_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        with start_simulator(Path(tmp) / "plain") as sim:
            records = asyncio.run(
                _probe(Target(name="sim", url=sim.url, model=sim.model), "warm", args.probes)
            )
            results["warm_http"] = _ttft_errors(sim, records)
        with start_simulator(Path(tmp) / "tls", tls=True) as sim:
            url = sim.url.replace("127.0.0.1", "localhost")
            target = Target(name="sim", url=url, model=sim.model, cacert=sim.cert_path)
            records = asyncio.run(_probe(target, "cold", args.probes // 2))
            results["cold_https_localhost"] = _ttft_errors(sim, records)
            results["versus_curl"] = asyncio.run(_versus_curl(sim, rounds=6, per_round=10))
    results["load_avg_after"] = os.getloadavg()
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
