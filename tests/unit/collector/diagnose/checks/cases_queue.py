"""The cases of collector/diagnose/checks/queue.py's checks: a window each finds in, one it
passes, one it cannot judge, and the series the unknown names (run by test_checks.py)."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.exporters import names
from tests.unit.collector.diagnose.build import Shape, window
from tests.unit.collector.diagnose.checks.windows import (
    COMPUTE_FULL,
    KV_FULL,
    Case,
)

CASES: dict[str, Case] = {
    "queue/kv-memory": (
        lambda: window(Shape(queue=1.5), KV_FULL),
        lambda: window(Shape(queue=1.5), COMPUTE_FULL),
        lambda: window(Shape(queue=1.5), None),
        names.VLLM_KV_CACHE_USAGE_PERC,
    ),
    "queue/compute": (
        lambda: window(Shape(queue=1.5), COMPUTE_FULL),
        lambda: window(Shape(queue=1.5), KV_FULL),
        lambda: window(Shape(queue=1.5), replace(COMPUTE_FULL, waiting=None)),
        names.VLLM_NUM_REQUESTS_WAITING,
    ),
    "queue/unsplit": (
        lambda: window(Shape(queue=1.5), None),
        lambda: window(Shape(queue=1.5), KV_FULL),
        lambda: window(Shape(queue=1.5, spans=False), None),
        "server phases",
    ),
}
