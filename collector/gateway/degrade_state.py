"""The gateway's degrade state and its application to one request: collector/common/degrade_state.py.

It lives in `common` so that code running in another process (the LiteLLM handler,
integrations/litellm/) applies the same shift, cap and shed without the gateway's dependencies.
"""

from __future__ import annotations

from lanewatch.collector.common.degrade_state import (
    ACTIONS,
    Decision,
    DegradeError,
    DegradePut,
    DegradeState,
    LaneDegrade,
    Shifter,
    cap_max_tokens,
    decide,
    is_stale,
    parse_degrade,
    parse_put,
    shifts_to_unknown_models,
)

__all__ = [
    "ACTIONS",
    "Decision",
    "DegradeError",
    "DegradePut",
    "DegradeState",
    "LaneDegrade",
    "Shifter",
    "cap_max_tokens",
    "decide",
    "is_stale",
    "parse_degrade",
    "parse_put",
    "shifts_to_unknown_models",
]
