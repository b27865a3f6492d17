"""How exact is the prober? Its TTFT against the simulator's ground truth, and its phases
against `curl -w` on the same streamed endpoint, over many sequential probes on loopback.

TTFT error = client TTFT − (dns + connect + tls) − the simulator's true ttft_s (arrival to
first content chunk handed to the socket). It holds the request's send, the server's
parsing before its handler runs, and the loopback trip back: what any client on this
machine would see above the server's own figure. `curl -w` sees no content chunk, so the
two clients are compared where both measure: connect, TLS, time to the response head
(TTFB) and the end of the stream less the connection phases, each against the same
server's truth (e2e error = client e2e − dns − connect − tls − true e2e_s), alternating
between them on cold HTTPS connections to `localhost`.

Run alone: `python -m bench.probe_accuracy [--probes 400] [--curl 60]`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target
from lanewatch.collector.record.timing import RequestTiming, breakdown
from lanewatch.collector.record.window import summarize
from tests.servers import SimHandle, start_simulator

__all__ = ["run_probe_accuracy"]

MAX_TOKENS = 4


def _spec(i: int) -> ProbeSpec:
    return ProbeSpec("short", "chat", MAX_TOKENS, prompt=f"bench probe {i}")


def _ms_summary(values: list[float]) -> dict[str, float]:
    s = summarize(values)
    if s is None:
        return {}
    return {k: round(getattr(s, k) * 1e3, 3) for k in ("p50", "p90", "p95", "p99", "min", "max")}


async def _probe(target: Target, connection: str, n: int) -> list[RequestTiming]:
    async with Prober(target, connection="cold" if connection == "cold" else "warm") as p:
        return [await p.probe(_spec(i)) for i in range(n)]


def _conn_s(r: RequestTiming) -> float:
    return (r.dns_s or 0) + (r.connect_s or 0) + (r.tls_s or 0)


def _ttft_errors(sim: SimHandle, records: list[RequestTiming]) -> dict[str, Any]:
    errors, token_mismatch, sum_gap = [], 0, 0.0
    with sim.client() as c:
        for r in records:
            truth = c.get(f"/debug/requests/{r.request_id}").json()
            errors.append((r.ttft_s or 0) - _conn_s(r) - truth["ttft_s"])
            token_mismatch += r.output_tokens != truth["output_tokens"]
            sum_gap = max(sum_gap, abs(sum(breakdown(r).values()) - (r.e2e_s or 0)))
    return {
        "probes": len(records),
        "failed": sum(1 for r in records if not r.ok),
        "ttft_err_ms": _ms_summary(errors),
        "token_mismatches": token_mismatch,
        "breakdown_max_gap_ms": round(sum_gap * 1e3, 4),
    }


def _curl_args(curl: str, url: str, cacert: str, model: str, ids: list[str]) -> list[str]:
    fmt = "%{time_namelookup} %{time_connect} %{time_appconnect} %{time_starttransfer} %{time_total}\\n"
    body = json.dumps(
        {"model": model, "stream": True, "max_tokens": MAX_TOKENS, "ignore_eos": True,
         "messages": [{"role": "user", "content": "bench curl"}]}
    )  # fmt: skip
    args = [curl]
    for i, rid in enumerate(ids):
        if i:
            args.append("--next")
        args += ["-s", "-N", "--cacert", cacert, "--no-sessionid", "-H", "Connection: close"]
        args += ["-H", "Content-Type: application/json", "-H", f"x-request-id: {rid}", "-d", body]
        args += ["-w", fmt, "-o", "/dev/null", f"{url}/v1/chat/completions"]
    return args


def _curl(curl: str, sim: SimHandle, url: str, n: int) -> list[dict[str, float]]:
    """`n` streamed requests by one curl process (after one that builds its TLS context)."""
    ids = [f"curl-{uuid.uuid4().hex}" for _ in range(n + 1)]
    args = _curl_args(curl, url, str(sim.cert_path), sim.model, ids)
    out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    rows = [[float(x) for x in line.split()] for line in out.splitlines() if line.strip()]
    timings = []
    with sim.client() as c:
        for rid, (dns, conn, app, start, total) in list(zip(ids, rows, strict=True))[1:]:
            truth = c.get(f"/debug/requests/{rid}").json()
            timings.append(
                {
                    "connect": conn - dns,
                    "tls": app - conn,
                    "ttfb": start - app,
                    "e2e_err": total - app - truth["e2e_s"],
                }
            )
    return timings


def _prober_rows(sim: SimHandle, records: list[RequestTiming]) -> list[dict[str, float]]:
    rows = []
    with sim.client() as c:
        for r in records:
            truth = c.get(f"/debug/requests/{r.request_id}").json()
            conn = _conn_s(r)
            rows.append(
                {
                    "connect": r.connect_s or 0,
                    "tls": r.tls_s or 0,
                    "ttfb": (r.ttfb_s or 0) - conn,
                    "e2e_err": (r.e2e_s or 0) - conn - truth["e2e_s"],
                }
            )
    return rows


async def _versus_curl(curl: str, sim: SimHandle, rounds: int, per_round: int) -> dict[str, Any]:
    url = sim.url.replace("127.0.0.1", "localhost")
    target = Target(name="sim", url=url, model=sim.model, cacert=sim.cert_path)
    ours: list[RequestTiming] = []
    theirs: list[dict[str, float]] = []
    async with Prober(target, connection="cold") as p:
        for _ in range(rounds):
            theirs += await asyncio.to_thread(_curl, curl, sim, url, per_round)
            ours += [await p.probe(_spec(i)) for i in range(per_round)]
    mine = await asyncio.to_thread(_prober_rows, sim, ours)
    out: dict[str, Any] = {"samples": len(mine)}
    for key in ("connect", "tls", "ttfb", "e2e_err"):
        out[f"probe_{key}_ms"] = _ms_summary([row[key] for row in mine])
        out[f"curl_{key}_ms"] = _ms_summary([row[key] for row in theirs])
    return out


def run_probe_accuracy(probes: int, curl_samples: int, tmp: Path) -> dict[str, Any]:
    """Warm HTTP and cold HTTPS probes against truth, then prober and curl side by side."""
    tmp.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    with start_simulator(tmp / "plain") as sim:
        target = Target(name="sim", url=sim.url, model=sim.model)
        asyncio.run(_probe(target, "warm", 5))  # warm-up: imports, first connection
        records = asyncio.run(_probe(target, "warm", probes))
        results["warm_http"] = _ttft_errors(sim, records)
    with start_simulator(tmp / "tls", tls=True) as sim:
        url = sim.url.replace("127.0.0.1", "localhost")
        target = Target(name="sim", url=url, model=sim.model, cacert=sim.cert_path)
        records = asyncio.run(_probe(target, "cold", max(probes // 2, 1)))
        results["cold_https_localhost"] = _ttft_errors(sim, records)
        curl = shutil.which("curl")
        if curl is not None and curl_samples > 0:
            rounds = max(1, min(6, curl_samples // 5))
            per_round = max(1, curl_samples // rounds)
            results["versus_curl"] = asyncio.run(_versus_curl(curl, sim, rounds, per_round))
    return results


def flat_keys(r: dict[str, Any]) -> dict[str, float]:
    """The results.json keys of this part."""
    warm, cold = r["warm_http"]["ttft_err_ms"], r["cold_https_localhost"]["ttft_err_ms"]
    out = {
        "probe_ttft_error_p50_ms": warm["p50"],
        "probe_ttft_error_p99_ms": warm["p99"],
        "probe_ttft_error_p50_ms_cold_https": cold["p50"],
        "probe_ttft_error_p99_ms_cold_https": cold["p99"],
        "probe_failed": r["warm_http"]["failed"] + r["cold_https_localhost"]["failed"],
    }
    vs = r.get("versus_curl")
    if vs:
        for key in ("connect", "tls", "ttfb", "e2e_err"):
            out[f"probe_{key}_p50_ms_vs_curl"] = vs[f"probe_{key}_ms"]["p50"]
            out[f"curl_{key}_p50_ms"] = vs[f"curl_{key}_ms"]["p50"]
        out["probe_minus_curl_e2e_p50_ms"] = round(
            out["probe_e2e_err_p50_ms_vs_curl"] - out["curl_e2e_err_p50_ms"], 3
        )
    return out


def main() -> None:
    """Run the accuracy benchmark alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probes", type=int, default=400)
    ap.add_argument("--curl", type=int, default=60, help="streamed requests each for curl and the prober")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        results = run_probe_accuracy(args.probes, args.curl, Path(d))
    print(json.dumps({"results": results, "keys": flat_keys(results)}, indent=2))


if __name__ == "__main__":
    main()
