"""Where the time goes and why: named checks over one window of evidence, ranked findings. Pure.

The evidence (records' stats, vLLM's series, the lanes' SLOs) comes in; findings with their
evidence, explained share, what was ruled out and the fixes go out. Prometheus queries and record
files are read at the edge (prometheus.py, the CLI), never by the checks.
"""

from lanewatch.collector.diagnose.evidence import (
    LaneEvidence,
    LaneStats,
    ServerSeries,
    SloTargets,
    Value,
    Window,
)
from lanewatch.collector.diagnose.model import Check, Explains, Finding, Fix, LaneDiagnosis, Signal, Verdict
from lanewatch.collector.diagnose.records import lanes_from_records
from lanewatch.collector.diagnose.registry import CHECKS, check_by_id
from lanewatch.collector.diagnose.run import diagnose, ranked, top_findings
from lanewatch.collector.diagnose.slo import slo_targets
from lanewatch.collector.diagnose.thresholds import DEFAULT_THRESHOLDS, Thresholds

__all__ = [
    "CHECKS",
    "DEFAULT_THRESHOLDS",
    "Check",
    "Explains",
    "Finding",
    "Fix",
    "LaneDiagnosis",
    "LaneEvidence",
    "LaneStats",
    "ServerSeries",
    "Signal",
    "SloTargets",
    "Thresholds",
    "Value",
    "Verdict",
    "Window",
    "check_by_id",
    "diagnose",
    "lanes_from_records",
    "ranked",
    "slo_targets",
    "top_findings",
]
