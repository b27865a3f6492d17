"""The degrade controller: Alertmanager notifications in, router degrade actions out.

webhook (Alertmanager's body) → decision (pure, with policy and state) → store (SQLite WAL,
state + audit log) → adapters (adapters/: one module per router, the gateway admin API, a
signed HTTP webhook, dry-run). It reaches routers only through an adapter: this package
never imports the gateway.
"""

from .adapters import Adapter, AdapterError, DryRunAdapter, GatewayAdapter, Retry, WebhookAdapter
from .decision import Action, Decision, classify, on_notification, on_tick
from .policy import DEFAULT_POLICY, Policy, PolicySpec, load_policy
from .state import AuditEntry, ControllerState, LaneSpec, desired_state
from .store import Store, StoreError
from .webhook import Notification, WebhookError, parse_notification

__all__ = [
    "DEFAULT_POLICY",
    "Action",
    "Adapter",
    "AdapterError",
    "AuditEntry",
    "ControllerState",
    "Decision",
    "DryRunAdapter",
    "GatewayAdapter",
    "LaneSpec",
    "Notification",
    "Policy",
    "PolicySpec",
    "Retry",
    "Store",
    "StoreError",
    "WebhookAdapter",
    "WebhookError",
    "classify",
    "desired_state",
    "load_policy",
    "on_notification",
    "on_tick",
    "parse_notification",
]
