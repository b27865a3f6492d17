"""How soon each router serves a degrade the controller applied: the gateway's admin API, Envoy's
route swap, nginx's include and reload, and the LiteLLM handler's admin endpoint.

The routers are the conformance suite's (tests/integration/conformance/routers.py), each started
as the suite starts it, in front of the same two loopback lanes. Each trial applies a 100 % shift
of the slow lane to the fast one through the router's own adapter, as the degrade controller
does, while a client sends a request the router routes to the slow lane (model `big`, no lane
header) every few milliseconds, one at a time; then it applies the empty state and does the
same until the slow lane serves again. Per router:

- `apply`: the adapter's `apply` call itself (the admin PUT; the route file written and Envoy's
  stats showing the new routes; nginx's include written and the reload signalled and seen);
- `served`: from the start of the apply to the response of the first request the new state
  served (the shift) or the old lane served again (the restore).

Run alone: `python -m bench.router_apply [--trials 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp

from bench.machine import machine_facts, part_facts
from lanewatch.collector.degrade_state.wire import LaneDegrade
from lanewatch.collector.record.window import summarize
from tests.integration.conformance.routers import ROUTERS, Conformant
from tests.integration.gateway_harness import upstream_server
from tests.sse_upstream import SseUpstream

__all__ = ["flat_keys", "run_router_apply"]

SHIFT = {"slow": LaneDegrade(shift_to="fast", shift_percent=100)}
GAP_S = 0.002  # between one answer and the next request
LIMIT_S = 30.0  # a change not served by then has failed
HEADERS = {"x-test-first-ms": "0", "x-test-gap-ms": "0"}
BODY = {"model": "big", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


async def _served_by(session: aiohttp.ClientSession, router: Conformant, ups: dict[str, SseUpstream]) -> str:
    """The lane that served one default request through `router`."""
    before = {lane: len(up.requests) for lane, up in ups.items()}
    async with session.post(f"{router.url}/v1/chat/completions", json=BODY, headers=HEADERS) as r:
        await r.read()
        if r.status != 200:
            raise RuntimeError(f"{router.kind}: HTTP {r.status}")
    grew = [lane for lane, up in ups.items() if len(up.requests) > before[lane]]
    if len(grew) != 1:
        raise RuntimeError(f"{router.kind}: the request reached {grew or 'no lane'}")
    return grew[0]


async def _change(
    session: aiohttp.ClientSession,
    router: Conformant,
    ups: dict[str, SseUpstream],
    state: dict[str, LaneDegrade],
    revision: int,
    want: str,
) -> tuple[float, float]:
    """Apply `state`; seconds the apply took and until a request was served by `want`."""
    started = time.monotonic()
    await router.adapter.apply(state, revision)
    applied = time.monotonic() - started
    while time.monotonic() - started < LIMIT_S:
        if await _served_by(session, router, ups) == want:
            return applied, time.monotonic() - started
        await asyncio.sleep(GAP_S)
    raise RuntimeError(f"{router.kind}: not served by {want} within {LIMIT_S:.0f} s of the apply")


async def _measure(trials: int, tmp: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        ups: dict[str, SseUpstream] = {}
        ports: dict[str, int] = {}
        for lane in ("fast", "slow"):
            up, url = await stack.enter_async_context(upstream_server(first_ms=0, gap_ms=0))
            ups[lane], ports[lane] = up, int(url.rsplit(":", 1)[1])
        connector = aiohttp.TCPConnector(force_close=True)  # nginx's reload closes idle connections
        session = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
        revisions = itertools.count(1)
        for kind, entry in ROUTERS.items():
            (tmp / kind).mkdir(parents=True, exist_ok=True)
            try:
                router = await stack.enter_async_context(entry.factory(tmp / kind, ports))
            except Exception as exc:  # a router that cannot run here is reported, not measured
                out[kind] = {"skipped": f"{type(exc).__name__}: {exc}"}
                continue
            await router.adapter.apply({}, next(revisions))  # as the controller starts: nothing degraded
            await asyncio.sleep(router.settle_s)
            assert await _served_by(session, router, ups) == "slow", f"{kind}: the default is not slow"
            keys = ("shift_apply", "shift_served", "restore_apply", "restore_served")
            rows: dict[str, list[float]] = {k: [] for k in keys}
            for _ in range(trials):
                a, s = await _change(session, router, ups, SHIFT, next(revisions), "fast")
                rows["shift_apply"].append(a)
                rows["shift_served"].append(s)
                await asyncio.sleep(router.settle_s)
                a, s = await _change(session, router, ups, {}, next(revisions), "slow")
                rows["restore_apply"].append(a)
                rows["restore_served"].append(s)
                await asyncio.sleep(router.settle_s)
            out[kind] = {k: _summary(v) for k, v in rows.items()}
    return out


def _summary(values: list[float]) -> dict[str, float]:
    s = summarize(values)
    assert s is not None
    return {"p50": round(s.p50, 5), "max": round(s.max, 5), "min": round(s.min, 5)}


def run_router_apply(trials: int, tmp: Path) -> dict[str, Any]:
    """Apply-to-served seconds of a shift and a restore, per router kind."""
    started, facts = time.monotonic(), machine_facts()
    routers = asyncio.run(_measure(trials, tmp))
    return {**part_facts(facts, started), "trials": trials, "routers": routers}


def flat_keys(result: dict[str, Any]) -> dict[str, float]:
    """The median and worst apply-to-served seconds per router, as results.json's flat keys."""
    keys: dict[str, float] = {}
    for kind, rows in result["routers"].items():
        if "skipped" in rows:
            continue
        for change in ("shift", "restore"):
            served = rows[f"{change}_served"]
            keys[f"router_apply_{kind}_{change}_served_p50_s"] = served["p50"]
            keys[f"router_apply_{kind}_{change}_served_max_s"] = served["max"]
    return keys


def main() -> None:
    """Print one run's figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-router-apply-") as tmp:
        print(json.dumps(run_router_apply(args.trials, Path(tmp)), indent=2))


if __name__ == "__main__":
    main()
