"""The cases of collector/diagnose/checks/client.py's checks: a window each finds in, one it
passes, one it cannot judge, and the series the unknown names (run by test_checks.py)."""

from __future__ import annotations

from tests.unit.collector.diagnose.build import Shape, window
from tests.unit.collector.diagnose.checks.windows import (
    Case,
)

CASES: dict[str, Case] = {
    "connection/setup": (
        lambda: window(Shape(connect=0.6, gap_s=12.0)),
        lambda: window(Shape(connect=0.01)),
        lambda: window(Shape(connect=0.6), n=5),
        "request records",
    ),
    "frontend/outside-engine": (
        lambda: window(Shape(residual=0.8)),
        lambda: window(Shape()),
        lambda: window(Shape(residual=0.8, spans=False)),
        "server phases",
    ),
}
