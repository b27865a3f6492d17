"""The cases of collector/diagnose/checks/prefill.py's checks: a window each finds in, one it
passes, one it cannot judge, and the series the unknown names (run by test_checks.py)."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.collector.diagnose import Value
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, Shape, window
from tests.unit.collector.diagnose.checks.windows import (
    Case,
)

CASES: dict[str, Case] = {
    "prefill/prefix-reuse": (
        lambda: window(Shape(prefill=1.5), replace(HEALTHY_SERVER, prefix_hit_rate=Value(0.05, "q"))),
        lambda: window(Shape(prefill=0.1)),
        lambda: window(Shape(prefill=1.5, spans=False)),
        "server phases",
    ),
}
