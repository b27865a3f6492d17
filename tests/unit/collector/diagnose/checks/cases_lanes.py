"""The cases of collector/diagnose/checks/lanes.py's checks: a window each finds in, one it
passes, one it cannot judge, and the series the unknown names (run by test_checks.py)."""

from __future__ import annotations

from lanewatch.collector.record.timing import ErrorKind
from tests.unit.collector.diagnose.build import Shape, window
from tests.unit.collector.diagnose.checks.windows import (
    Case,
    empty,
    no_itl,
    pair,
)

CASES: dict[str, Case] = {
    "latency/flat": (
        lambda: window(Shape(queue=2.0, tpot=0.001)),
        lambda: window(Shape()),
        no_itl,
        "request classes",
    ),
    "lanes/misrouting": (
        lambda: pair(Shape(queue=1.0), Shape(queue=1.1)),
        lambda: pair(Shape(), Shape(queue=1.1)),
        lambda: pair(Shape(queue=1.0), Shape(error_every=1)),
        "TTFT P99",
    ),
    "errors/shedding": (
        lambda: window(Shape(error_every=10)),
        lambda: window(Shape(error_every=10, error=ErrorKind.CLIENT_DISCONNECT)),
        empty,
        "request records",
    ),
}
