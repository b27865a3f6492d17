"""The fast guard: a lane's TTFT misses counted at first token or by in-flight age, fired into
Alertmanager within seconds, with the labels of the generated mitigation alerts.

Sources report progress (progress/inflight.py) → `judge` (each request once) → `decide` (windows,
evidence floor, fire and resolve) → `alert` (the postable alert) → `alertmanager` (the post;
the wiring imports it, for config reads this face).
"""

from .alert import GUARD_SOURCE, GuardAlert
from .decide import GuardRule
from .guard import FastGuard, LaneView

__all__ = ["GUARD_SOURCE", "FastGuard", "GuardAlert", "GuardRule", "LaneView"]
