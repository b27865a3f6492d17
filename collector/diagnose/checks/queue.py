"""Queue-bound lanes: waiting for KV memory, waiting for compute, or queue-bound with the cause unsplit.

vLLM's queue is QUEUED -> last SCHEDULED. A request waits either because the KV cache is full
(usage at the limit, running requests preempted) or because the batch is full of work the
memory could hold (steps at the token budget). The records show the queue's share of TTFT;
vLLM's series split the cause. With the records alone the finding stands at the phase level.
"""

from __future__ import annotations

from lanewatch.collector.diagnose.checks.base import BaseCheck, explains, share_signal, symptom
from lanewatch.collector.diagnose.evidence import LaneEvidence, ServerSeries, Value, Window, need
from lanewatch.collector.diagnose.model import Finding, Fix, Signal
from lanewatch.collector.diagnose.thresholds import Thresholds

__all__ = ["QueueCompute", "QueueKvMemory", "QueueUnsplit"]

TUNING = "vLLM's optimization and tuning guide (preemption)"
KV_FIXES = (
    Fix("raise --gpu-memory-utilization", "more KV blocks, so fewer requests wait or are preempted", TUNING),
    Fix("lower --max-num-seqs", "fewer concurrent sequences compete for KV blocks", TUNING),
    Fix(
        "--kv-cache-dtype fp8",
        "about twice the tokens in the same KV memory",
        "vLLM's quantized KV cache docs",
    ),
    Fix("add replicas (or tensor parallelism)", "more KV memory for the lane's load", TUNING),
)
COMPUTE_FIXES = (
    Fix("add replicas to the lane", "more engine steps per second for the queued work", "capacity"),
    Fix(
        "route short work to the fast lane (gateway routing rules)",
        "less work queued behind long prompts",
        "lanewatch gateway routing (docs/gateway.md)",
    ),
)


def _queue_share(lane: LaneEvidence) -> Value | None:
    return lane.stats.share(("queue",), "ttft") if lane.stats.server_phases else None


def little_wait(lane: LaneEvidence) -> Value | None:
    """The mean wait vLLM's queue accounts for, by Little's law: mean waiting / finish rate."""
    s = lane.server
    if s.waiting is None or s.finished_per_s is None or s.finished_per_s.value <= 0:
        return None
    wait = s.waiting.value / s.finished_per_s.value
    return Value(wait, f"({s.waiting.source}) / ({s.finished_per_s.source})")


def _waiting(lane: LaneEvidence, t: Thresholds) -> bool:
    """Requests wait in vLLM's queue, and (when measurable) that queue accounts for the queue time."""
    s = lane.server
    if s.waiting is None or s.waiting.value <= t.waiting_above:
        return False
    wait, queue = little_wait(lane), lane.stats.parts.get("queue") if lane.stats.server_phases else None
    if wait is None or queue is None or queue.value <= 0:
        return True
    return wait.value >= t.waiting_explains * queue.value


def kv_bound(lane: LaneEvidence, t: Thresholds) -> bool:
    """KV memory is the limit: usage at the limit while requests wait, or preemptions."""
    s = lane.server
    kv_usage = need(s.kv_usage, "kv_usage")
    # vLLM preempts only when a running request finds no free block: the limit was reached, though
    # usage averaged over the window (it falls as requests finish) may sit below the threshold
    preempted = s.preemptions_per_s is not None and s.preemptions_per_s.value > t.preemptions_per_s
    return preempted or (kv_usage.value >= t.kv_usage and _waiting(lane, t))


def compute_bound(lane: LaneEvidence, t: Thresholds) -> bool:
    """Requests wait in vLLM's queue while KV memory has room and nothing is preempted."""
    s = lane.server
    kv_usage, preempted = need(s.kv_usage, "kv_usage"), need(s.preemptions_per_s, "preemptions_per_s")
    return _waiting(lane, t) and kv_usage.value < t.kv_usage and preempted.value <= t.preemptions_per_s


def _server_signals(lane: LaneEvidence, t: Thresholds) -> list[Signal]:
    s = lane.server
    out = []
    if s.waiting is not None:
        out.append(Signal.held("waiting requests (mean)", s.waiting, ">", t.waiting_above))
    wait = little_wait(lane)
    queue = lane.stats.parts.get("queue") if lane.stats.server_phases else None
    if wait is not None:
        limit = t.waiting_explains * queue.value if queue is not None else None
        out.append(Signal.held("queue time vLLM's waiting accounts for (Little's law, s)", wait, ">=", limit))
    if s.kv_usage is not None:
        out.append(Signal.held("KV-cache usage", s.kv_usage, ">=", t.kv_usage))
    if s.preemptions_per_s is not None:
        out.append(Signal.held("preemptions/s", s.preemptions_per_s, ">", t.preemptions_per_s))
    return out


class QueueKvMemory(BaseCheck):
    """Requests wait for KV-cache memory."""

    id = "queue/kv-memory"
    title = "queue-bound on KV memory"
    explanation = (
        "KV-cache usage at the limit while requests wait, or preemptions (vLLM preempts only when a "
        "running request finds no free block, so the cache ran out even when its usage averaged over "
        "the window is below the limit, as it falls each time requests finish). Fixes: raise "
        "`--gpu-memory-utilization`, lower `--max-num-seqs`, `--kv-cache-dtype fp8` (about twice the "
        "tokens in the same memory), more replicas or tensor parallelism (vLLM's tuning guide, "
        "preemption; vLLM's quantized KV cache docs)."
    )
    needs = ("kv_usage", ("waiting", "preemptions_per_s"))
    reads = ("server_phases", "finished_per_s")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """KV usage at the limit with requests waiting, or preemptions."""
        s = lane.server
        bound = kv_bound(lane, thresholds)
        evidence = _server_signals(lane, thresholds)
        share = _queue_share(lane)
        if share is not None:
            evidence.insert(0, share_signal("queue share of TTFT", share, thresholds.queue_share))
        if not bound:
            return self.ok(lane, "KV memory is not the limit", evidence, _ruled_out(s, thresholds))
        return self.found(
            lane,
            "requests wait for KV-cache memory: usage at the limit while requests wait, or preemptions",
            evidence,
            explains("ttft", share) if share else None,
            KV_FIXES,
            missing=() if share else ("server_phases",),
        )


class QueueCompute(BaseCheck):
    """Requests wait for compute while KV memory has room."""

    id = "queue/compute"
    title = "queue-bound on compute"
    explanation = (
        "requests wait in vLLM's queue (and, by Little's law, that queue accounts for the measured "
        "queue time) while KV memory has room and nothing is preempted, and the queue is a large "
        "share of TTFT; tokens per step against `--max-num-batched-tokens` when given. Fixes: "
        "replicas; route short work to the fast lane ([gateway.md](gateway.md))."
    )
    needs = ("waiting", "kv_usage", "preemptions_per_s")
    reads = ("server_phases", "step_tokens_p90", "finished_per_s")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """Waiting > 0, KV below the limit, no preemptions, and the queue a large part of TTFT."""
        s = lane.server
        bound = compute_bound(lane, thresholds)
        evidence = _server_signals(lane, thresholds)
        evidence += _step_signals(s, thresholds)
        share = _queue_share(lane)
        ttft = symptom(lane, "ttft", thresholds)
        if share is not None:
            evidence.insert(0, share_signal("queue share of TTFT", share, thresholds.queue_share))
            anchored = share.value >= thresholds.queue_share
        else:
            anchored = ttft.missed
        if ttft.signal is not None:
            evidence.insert(0, ttft.signal)
        if not (bound and anchored):
            return self.ok(lane, "requests do not wait long for compute", evidence, _ruled_out(s, thresholds))
        return self.found(
            lane,
            "requests wait for a batch slot while KV memory has room: the engine's compute is the limit",
            evidence,
            explains("ttft", share) if share else None,
            COMPUTE_FIXES,
            missing=() if share else ("server_phases",),
        )


def _step_signals(s: ServerSeries, t: Thresholds) -> list[Signal]:
    if s.step_tokens_p90 is None:
        return []
    if t.max_num_batched_tokens is None:
        return [Signal.shown("tokens per step p90 (token budget not given)", s.step_tokens_p90)]
    budget = t.max_num_batched_tokens * t.step_budget_share
    return [Signal.held("tokens per step p90", s.step_tokens_p90, ">=", budget)]


def _ruled_out(s: ServerSeries, t: Thresholds) -> list[str]:
    out = []
    if s.kv_usage is not None and s.kv_usage.value < t.kv_usage:
        out.append(f"KV-cache usage {s.kv_usage.value:.2f} below {t.kv_usage}")
    if s.waiting is not None and s.waiting.value <= t.waiting_above:
        out.append(f"no requests waiting (mean {s.waiting.value:.2f})")
    if s.preemptions_per_s is not None and s.preemptions_per_s.value <= t.preemptions_per_s:
        out.append("no preemptions")
    return out


class QueueUnsplit(BaseCheck):
    """The queue dominates TTFT but vLLM's series do not say why."""

    id = "queue/unsplit"
    title = "queue-bound, cause unsplit"
    explanation = (
        "the queue is most of TTFT (TTFT over its SLO) and neither cause check found the cause (its "
        "`explained_by`: `queue/kv-memory`, `queue/compute`); names the missing series, or says "
        "vLLM's own queue does not account for the wait."
    )
    needs = ("min_requests", "server_phases")
    reads = ("waiting", "kv_usage", "preemptions_per_s", "finished_per_s")
    explained_by = ("queue/kv-memory", "queue/compute")

    def run(self, lane: LaneEvidence, window: Window, thresholds: Thresholds) -> Finding:
        """A phase-level finding when the queue is most of TTFT (the runner: no cause check explains it)."""
        share = need(_queue_share(lane), "server_phases")
        held = share_signal("queue share of TTFT", share, thresholds.queue_share)
        evidence, ok = self.gate(lane, thresholds, held, f"the queue is {share.value:.0%} of TTFT")
        if ok is not None:
            return ok
        s = lane.server
        gaps = [f for f in ("waiting", "kv_usage", "preemptions_per_s") if getattr(s, f) is None]
        evidence += _server_signals(lane, thresholds)
        why = (
            "vLLM's series that would split the cause are missing"
            if gaps
            else "vLLM's own queue does not account for the wait: it is ahead of the scheduler"
        )
        return self.found(
            lane,
            f"queue-bound ({share.value:.0%} of TTFT), cause unsplit: {why}",
            evidence,
            explains("ttft", share),
            COMPUTE_FIXES[:1],
            ruled_out=_ruled_out(s, thresholds),
            missing=gaps,
        )
