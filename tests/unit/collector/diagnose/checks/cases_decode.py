"""The cases of collector/diagnose/checks/decode.py's checks: a window each finds in, one it
passes, one it cannot judge, and the series the unknown names (run by test_checks.py)."""

from __future__ import annotations

from dataclasses import replace

from lanewatch.collector.diagnose import SloTargets, Value
from lanewatch.exporters import names
from tests.unit.collector.diagnose.build import HEALTHY_SERVER, Shape, window
from tests.unit.collector.diagnose.checks.windows import (
    STALLS,
    Case,
    no_itl,
)

CASES: dict[str, Case] = {
    "interference/prefill-decode": (
        lambda: window(STALLS),
        lambda: window(replace(STALLS, long_prompt_every=0)),
        no_itl,
        "ITL gaps",
    ),
    "decode/bound": (
        lambda: window(Shape(tpot=0.08)),
        lambda: window(Shape()),
        lambda: window(Shape(tpot=0.08), slo=SloTargets(ttft_s=0.5)),
        "TPOT SLO",
    ),
    "spec-decode/acceptance": (
        lambda: window(Shape(tpot=0.08), replace(HEALTHY_SERVER, spec_acceptance_length=Value(1.2, "q"))),
        lambda: window(Shape(tpot=0.08), replace(HEALTHY_SERVER, spec_acceptance_length=Value(2.4, "q"))),
        lambda: window(Shape(tpot=0.08)),
        names.VLLM_SPEC_DECODE_NUM_DRAFTS_TOTAL,
    ),
}
