"""The diagnosis scenario matrix: each condition the simulator produces on purpose, the workload that
shows it, and the check that must name it. test_diagnose_scenarios.py runs `SCENARIOS` from records,
test_diagnose_prometheus.py runs `PROMETHEUS_SCENARIOS` through a real Prometheus, and
docs/diagnose.md shows `matrix_table()` (a test keeps the page in step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from lanewatch.collector.probe.settings import DEFAULT_CLASSES, RequestClass

REQUESTS = 24  # over the 20 a verdict needs

# a fixed prompt that every request shares (an exact `prompt` is sent as written): ~14,000 tokens,
# which the slow profile prefills in over its 2 s TTFT SLO
SHARED_PROMPT = " ".join(["the harbor lamp keeps the river stone"] * 2000)
CLASSES: tuple[RequestClass, ...] = (
    *DEFAULT_CLASSES,
    RequestClass(name="tiny2", prompt_words=8, max_tokens=2),
    RequestClass(name="tiny6", prompt_words=8, max_tokens=6),
    RequestClass(name="answer", prompt_words=12, max_tokens=24),
    RequestClass(name="longprompt", prompt_words=1500, max_tokens=2),
    RequestClass(name="shared", prompt=SHARED_PROMPT, max_tokens=2),
)


@dataclass(frozen=True)
class Probe:
    """One `lanewatch probe` process: its class, count and pause between requests."""

    request_class: str = "short"
    requests: int = REQUESTS
    interval_s: float = 0.0
    cold: bool = False  # a new connection per request


@dataclass(frozen=True)
class Run:
    """One simulator (its profile is the lane) and the probes sent to it."""

    profile: str = "fast"
    sim: dict[str, Any] = field(default_factory=dict)  # `lanewatch sim` flags; "faults" as JSON
    probes: tuple[Probe, ...] = (Probe(),)
    together: bool = False  # probes at once (no spans joined), else one after another, spans joined

    @property
    def joined(self) -> bool:
        """Whether vLLM's spans are joined to the records (one probe process at a time)."""
        return not self.together


@dataclass(frozen=True)
class Scenario:
    """A condition: its runs, and the top finding of the first run's lane (None: no finding at all)."""

    runs: tuple[Run, ...]
    expected: str | None = None
    also: frozenset[str] = frozenset()  # other findings the condition itself causes
    classes: tuple[RequestClass, ...] = CLASSES

    @property
    def lane(self) -> str:
        """The lane the condition is in."""
        return self.runs[0].profile


def _one(profile: str = "fast", probe: Probe = Probe(), **sim: Any) -> tuple[Run, ...]:
    return (Run(profile, sim, (probe,)),)


SCENARIOS: dict[str, Scenario] = {
    # a fast lane's P99 over 24 requests is their maximum, which one scheduling hiccup on a loaded
    # machine can push past 0.5 s; over 100 it interpolates, and one outlier moves it 1%
    "healthy fast, idle": Scenario(_one(probe=Probe(requests=100))),
    "healthy slow, idle": Scenario(_one("slow")),
    "healthy fast, steady load": Scenario((Run("fast", {}, (Probe(requests=60),) * 3, together=True),)),
    "healthy slow, steady load": Scenario((Run("slow", {}, (Probe(requests=10),) * 3, together=True),)),
    "queue delay": Scenario(_one(faults={"queue_delay_s": 0.6}), "queue/unsplit"),
    "queue delay, no spans": Scenario(
        (Run("fast", {"faults": {"queue_delay_s": 0.6}}, (Probe(),), together=True),), "server-wait/unsplit"
    ),
    "slow prefill, long prompts": Scenario(
        _one(probe=Probe("summary"), faults={"prefill_slowdown": 60.0}), "prefill/prefix-reuse"
    ),
    "prefix caching off, shared prefix": Scenario(
        _one("slow", Probe("shared", 20), no_enable_prefix_caching=True), "prefill/prefix-reuse"
    ),
    "prefix caching on, shared prefix": Scenario(_one("slow", Probe("shared", 20))),
    "decode slowdown": Scenario(_one(faults={"decode_slowdown": 30.0}), "decode/bound"),
    "prefill/decode interference": Scenario(
        (
            Run(
                "slow",
                {},
                (Probe("answer", 12),) * 2 + (Probe("longprompt", 10, interval_s=0.3),) * 2,
                together=True,
            ),
        ),
        "interference/prefill-decode",
    ),
    "front-end delay": Scenario(_one(faults={"frontend_delay_s": 0.6}), "frontend/outside-engine"),
    "slow TLS handshake": Scenario(
        _one(probe=Probe(cold=True), tls=True, faults={"tls_handshake_delay_s": 0.6}), "connection/setup"
    ),
    "idle gaps over keep-alive": Scenario(
        _one(
            probe=Probe(requests=20, interval_s=1.3),
            tls=True,
            keep_alive_s=1,
            faults={"tls_handshake_delay_s": 0.6},
        ),
        "connection/setup",
    ),
    "flat latency": Scenario(
        (
            Run(
                "fast",
                {"faults": {"queue_delay_s": 0.3, "frontend_delay_s": 0.3}},
                (Probe("tiny2", 12), Probe("tiny6", 12)),
            ),
        ),
        "latency/flat",
        also=frozenset({"queue/unsplit", "frontend/outside-engine"}),
    ),
    "lane convergence": Scenario(
        (
            Run("fast", {"faults": {"queue_delay_s": 0.8}}, (Probe("answer"),)),
            Run("slow", {}, (Probe("short", 20),)),
        ),
        "lanes/misrouting",
        also=frozenset({"queue/unsplit"}),
    ),
    "errors (429)": Scenario(_one(faults={"error_rates": {"429": 0.3}}), "errors/shedding"),
}


@dataclass(frozen=True)
class PromScenario:
    """A condition only vLLM's series can split: simulator flags, probe classes, the top finding."""

    sim: dict[str, Any]
    expected: str
    classes: tuple[dict[str, Any], ...]
    concurrency: int = 8


_SMALL = tuple({"name": f"c{i}", "prompt_words": 8, "max_tokens": 4 + 2 * i} for i in range(8))
PROMETHEUS_SCENARIOS: dict[str, PromScenario] = {
    "demo-fault": PromScenario({"faults": {"queue_delay_s": 2.5}}, "queue/unsplit", _SMALL),
    "one-sequence": PromScenario({"max_num_seqs": 1}, "queue/compute", _SMALL),
    # K=3 at acceptance 0.3: mean acceptance length 1 + 0.3 + 0.09 + 0.027 = 1.42, under 1.5
    "spec-decode": PromScenario(
        {"num_speculative_tokens": 3, "spec_acceptance": 0.3, "spec_draft_token_s": 0.02},
        "spec-decode/acceptance",
        tuple({"name": f"s{i}", "prompt_words": 8, "max_tokens": 24} for i in range(2)),
        concurrency=2,
    ),
}


# Checked on built evidence only (tests/unit/collector/diagnose/): the collector's probes did not hold
# enough long prompts in flight to fill the simulator's KV cache within a short run.
UNIT_ONLY: tuple[str, ...] = ("queue/kv-memory",)


def _flags(sim: dict[str, Any]) -> str:
    parts = []
    for key, value in sim.items():
        if key == "faults":
            parts += [f"`{k}: {json.dumps(v)}`" for k, v in value.items()]
        elif value is True:
            parts.append(f"`--{key.replace('_', '-')}`")
        else:
            parts.append(f"`--{key.replace('_', '-')} {value}`")
    return ", ".join(parts) or "no fault"


def _workload(run: Run) -> str:
    counts: dict[str, int] = {}
    for p in run.probes:
        label = p.request_class + (", new connection each" if p.cold else "")
        label += f", {p.interval_s:g} s apart" if p.interval_s else ""
        counts[label] = counts.get(label, 0) + p.requests
    how = "at once" if run.together and len(run.probes) > 1 else "in turn"
    return f"{run.profile}: " + " + ".join(f"{n} {label}" for label, n in counts.items()) + f" ({how})"


def matrix_table() -> str:
    """The matrix as docs/diagnose.md shows it: both lists, with each scenario's top finding."""
    rows = [
        "| scenario | simulator | lane: requests | top finding | may also find |",
        "|---|---|---|---|---|",
    ]
    for name, sc in SCENARIOS.items():
        sim = "; ".join(_flags(r.sim) for r in sc.runs)
        work = "; ".join(_workload(r) for r in sc.runs)
        top = f"`{sc.expected}`" if sc.expected else "none"
        also = ", ".join(f"`{a}`" for a in sorted(sc.also)) or "-"
        rows.append(f"| {name} | {sim} | {work} | {top} | {also} |")
    for name, ps in PROMETHEUS_SCENARIOS.items():
        work = f"slow: {len(ps.classes)} classes, {ps.concurrency} in flight (collector, Prometheus)"
        rows.append(f"| {name} | {_flags(ps.sim)} | {work} | `{ps.expected}` | - |")
    return "\n".join(rows)
