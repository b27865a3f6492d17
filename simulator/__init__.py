"""lanewatch.simulator: a vLLM-compatible server with a continuous-batching timing model.

Its contract is vLLM's (OpenAI API, /metrics names, OTLP spans), so it imports nothing else of lanewatch.
The pure parts are re-exported here; the server is `lanewatch.simulator.app` /
`lanewatch.simulator.server` (run it with `lanewatch sim`).
"""

from .engine import Engine, EngineConfig, EngineRequest, RequestTimes, StepCost, StepResult
from .faults import FaultError, FaultSpec, parse_faults
from .profiles import FAST, PROFILES, SLOW, Profile

__all__ = [
    "FAST",
    "PROFILES",
    "SLOW",
    "Engine",
    "EngineConfig",
    "EngineRequest",
    "FaultError",
    "FaultSpec",
    "Profile",
    "RequestTimes",
    "StepCost",
    "StepResult",
    "parse_faults",
]
