"""The cases of collector/diagnose/checks/server_wait.py's checks: a window each finds in, one it
passes, one it cannot judge, and the series the unknown names (run by test_checks.py)."""

from __future__ import annotations

from tests.unit.collector.diagnose.build import Shape, window
from tests.unit.collector.diagnose.checks.windows import (
    Case,
)

CASES: dict[str, Case] = {
    "server-wait/unsplit": (
        lambda: window(Shape(queue=1.5, spans=False), None),
        lambda: window(Shape(queue=1.5), None),
        lambda: window(Shape(queue=1.5, spans=False), n=5),
        "request records",
    ),
}
