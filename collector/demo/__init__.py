"""`lanewatch demo`: the whole loop on 127.0.0.1 (simulated lanes, gateway, collector, controller,
real Prometheus and Alertmanager), a fault in the slow lane, and what the stack does about it."""

from __future__ import annotations

from .configs import Layout
from .events import KINDS, Event
from .run import DemoResult, Options, run_demo
from .stack import Stack, Tools
from .supervisor import Supervisor, free_ports
from .timeline import Plan

__all__ = [
    "KINDS",
    "DemoResult",
    "Event",
    "Layout",
    "Options",
    "Plan",
    "Stack",
    "Supervisor",
    "Tools",
    "free_ports",
    "run_demo",
]
