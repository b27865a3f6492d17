"""What every check shares: building its three verdicts and reading the lane's SLO symptom."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from lanewatch.collector.diagnose.evidence import EVIDENCE, MISSING, LaneEvidence, Need, Value, flat_keys
from lanewatch.collector.diagnose.model import Explains, Finding, Fix, Signal
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["BaseCheck", "Symptom", "any_latency_miss", "explains", "share_signal", "symptom"]


class BaseCheck:
    """A check's identity and declarations; subclasses set them and write `run`.

    `run` is called only when the lane has every key in `needs`; a value it finds missing on the
    way is taken with `evidence.need(value, key)`, so the runner says `unknown` for it as well.
    """

    id = ""
    title = ""
    explanation = ""
    needs: tuple[Need, ...] = ()
    reads: tuple[str, ...] = ()
    explained_by: tuple[str, ...] = ()

    @property
    def prometheus(self) -> bool:
        """True when a key it needs is one of vLLM's series (only Prometheus has them)."""
        return any(EVIDENCE[k].prometheus for k in flat_keys(self.needs))

    def ok(
        self, lane: LaneEvidence, summary: str, evidence: Iterable[Signal] = (), ruled_out: Iterable[str] = ()
    ) -> Finding:
        """Checked and exonerated, with what was looked at."""
        ruled = tuple(ruled_out) or (summary,)
        return Finding(self.id, self.title, lane.lane, "ok", summary, tuple(evidence), ruled_out=ruled)

    def gate(
        self,
        lane: LaneEvidence,
        thresholds: Thresholds,
        held: Signal,
        summary: str,
        shown: Iterable[Signal] = (),
    ) -> tuple[list[Signal], Finding | None]:
        """The evidence (the lane's TTFT against its SLO first), and `ok` unless `held` is breached
        and the TTFT SLO is missed or unknown: the one rule of every share check."""
        ttft = symptom(lane, "ttft", thresholds)
        evidence = [*([ttft.signal] if ttft.signal is not None else []), held, *shown]
        if not held.breached:
            return evidence, self.ok(lane, summary, evidence)
        if ttft.met and ttft.signal is not None:
            name = ttft.signal.signal.removesuffix(" (SLO)")
            met = f"{name} {ttft.signal.value:.3g} s meets its SLO of {ttft.signal.threshold:g} s"
            return evidence, self.ok(lane, f"{summary}, but {met}", evidence)
        return evidence, None

    def found(
        self,
        lane: LaneEvidence,
        summary: str,
        evidence: Iterable[Signal],
        explains: Explains | None,
        fixes: Iterable[Fix],
        ruled_out: Iterable[str] = (),
        missing: Iterable[str] = (),
    ) -> Finding:
        """The cause stands: its evidence, what it explains and how to fix it."""
        return Finding(
            self.id,
            self.title,
            lane.lane,
            "finding",
            summary,
            tuple(evidence),
            explains,
            tuple(ruled_out),
            tuple(fixes),
            tuple(MISSING.get(m, m) for m in missing),
        )


class Symptom:
    """Whether the lane misses one latency SLO: the anchor a latency finding needs."""

    def __init__(self, metric: str, signal: Signal | None) -> None:
        self.metric = metric
        self.signal = signal

    @property
    def missed(self) -> bool:
        """True when the quantile is over the SLO."""
        return self.signal is not None and self.signal.breached

    @property
    def known(self) -> bool:
        """True when both the quantile and the SLO are known."""
        return self.signal is not None and self.signal.threshold is not None

    @property
    def met(self) -> bool:
        """True when the SLO is known and met: only then does a share check rule itself out.

        With no SLO known a share check judges on the share alone, so a lane with no spec is
        still diagnosed; with the SLO met, a large share is how the lane works, not a fault.
        """
        return self.known and not self.missed


def symptom(lane: LaneEvidence, metric: str, thresholds: Thresholds) -> Symptom:
    """The lane's quantile of `metric` (ttft | tpot | e2e | itl) held against its SLO."""
    q = round(thresholds.slo_quantile * 100)
    value = lane.stats.quantile(f"{metric}_p{q}")
    slo = lane.slo.get(metric)
    if value is None:
        return Symptom(metric, None)
    return Symptom(metric, Signal.held(f"{metric} p{q} (SLO)", value, ">", slo))


def any_latency_miss(lane: LaneEvidence, thresholds: Thresholds) -> list[Signal]:
    """The SLOs the lane misses (ttft, tpot, e2e, itl), as signals."""
    out = []
    for metric in ("ttft", "tpot", "e2e", "itl"):
        s = symptom(lane, metric, thresholds)
        if s.missed and s.signal is not None:
            out.append(s.signal)
    return out


def share_signal(name: str, share: Value, threshold: float) -> Signal:
    """A share of TTFT or E2E held at-or-above its threshold."""
    return Signal.held(name, share, ">=", threshold)


def explains(of: Literal["ttft", "e2e", "requests"], share: Value) -> Explains:
    """What the finding explains, from a measured share."""
    return Explains(of, round(share.value, 4), share.source)
