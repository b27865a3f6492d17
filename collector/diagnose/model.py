"""What a diagnosis says: checks, their findings, the evidence behind each, and the ranking.

A `Check` has a stable id (`queue/kv-memory`), a one-line title, a longer explanation, the
evidence keys it needs and reads (evidence.EVIDENCE), the checks whose finding already explains
it, and a pure `run` over one lane's evidence. Its `Finding` has a verdict: `finding` (the cause
stands, with evidence), `ok` (checked and exonerated), or `unknown` (a key it needs is missing:
`missing` names the series; the runner says so, never the check). A symptom such as a high P99
is evidence that anchors a finding to the lane's SLO, never its cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from lanewatch.collector.diagnose.evidence import LaneEvidence, Need, Value, Window
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["Check", "Explains", "Finding", "Fix", "LaneDiagnosis", "Signal", "Verdict"]

Verdict = Literal["finding", "ok", "unknown"]
VERDICT_ORDER: dict[Verdict, int] = {"finding": 0, "unknown": 1, "ok": 2}


@dataclass(frozen=True, slots=True)
class Signal:
    """One piece of evidence: a signal's value, the threshold it was held to, and its computation."""

    signal: str
    value: float
    threshold: float | None
    comparison: str  # ">=", "<", ... : how value was held against threshold ("" when not held)
    source: str  # the PromQL query or the computation over records
    breached: bool

    @classmethod
    def held(cls, signal: str, v: Value, op: str, threshold: float | None) -> Signal:
        """The value held against `threshold` by `op` (">=", ">", "<", "<=")."""
        breached = threshold is not None and _compare(v.value, op, threshold)
        return cls(signal, v.value, threshold, op if threshold is not None else "", v.source, breached)

    @classmethod
    def shown(cls, signal: str, v: Value) -> Signal:
        """A value shown for context, held to no threshold."""
        return cls(signal, v.value, None, "", v.source, False)


def _compare(value: float, op: str, threshold: float) -> bool:
    return {
        ">=": value >= threshold,
        ">": value > threshold,
        "<": value < threshold,
        "<=": value <= threshold,
    }[op]


@dataclass(frozen=True, slots=True)
class Fix:
    """A recommended change: the flag or setting, its expected effect, and where that comes from."""

    action: str
    effect: str
    source: str


@dataclass(frozen=True, slots=True)
class Explains:
    """The share of the lane's TTFT or E2E (or of its requests, for errors) a finding explains."""

    of: Literal["ttft", "e2e", "requests"]
    share: float
    source: str


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's result for one lane."""

    check: str
    title: str
    lane: str
    verdict: Verdict
    summary: str
    evidence: tuple[Signal, ...] = ()
    explains: Explains | None = None
    ruled_out: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()
    missing: tuple[str, ...] = ()  # the series an `unknown` (or an unsplit finding) lacks

    @property
    def rank_key(self) -> tuple[int, float, str]:
        """Findings first, the one explaining most first; then unknowns, then oks."""
        share = self.explains.share if self.explains else 0.0
        return (VERDICT_ORDER[self.verdict], -share, self.check)


class Check(Protocol):
    """A named diagnosis check (after pint's checks: one module per check or small family)."""

    @property
    def id(self) -> str:
        """Stable id, `area/name`."""
        ...

    @property
    def title(self) -> str:
        """One line: the cause this check looks for."""
        ...

    @property
    def explanation(self) -> str:
        """What it looks for and the fixes it gives, for the docs (a paragraph of Markdown)."""
        ...

    @property
    def needs(self) -> tuple[Need, ...]:
        """The evidence keys it cannot judge without (a tuple: any one of them); unmet, it is `unknown`."""
        ...

    @property
    def reads(self) -> tuple[str, ...]:
        """The evidence keys it uses when the lane has them."""
        ...

    @property
    def explained_by(self) -> tuple[str, ...]:
        """The checks whose finding explains this one's: when one fires, this one is `ok`."""
        ...

    @property
    def prometheus(self) -> bool:
        """True when it needs vLLM's series, which only a live Prometheus gives."""
        ...

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Judge one lane."""
        ...


@dataclass(frozen=True, slots=True)
class LaneDiagnosis:
    """Every check's finding for one lane, ranked."""

    lane: str
    findings: tuple[Finding, ...] = field(default_factory=tuple)

    @property
    def found(self) -> tuple[Finding, ...]:
        """The findings whose verdict is `finding`, best explanation first."""
        return tuple(f for f in self.findings if f.verdict == "finding")
