"""Degrade: what the controller did to which lane, when, why (the alerts), and whether its adapters worked."""

from __future__ import annotations

from typing import Any

from lanewatch.exporters import names

from .panels import Query, dashboard, timeline, timeseries
from .templating import LANE, RATE, firing, sel


def _state_panels() -> list[Any]:
    return [
        timeline(
            "Degrade state",
            "Each lane's degrade actions over time (shift, cap_max_tokens, shed). Red: in force. A "
            "lane stays red for at least the hold time and restores once the alert behind it has "
            "resolved and stayed quiet.",
            [Query(f"max by (lane, action) ({sel(names.DEGRADE_ACTIVE, LANE)})", "{{lane}} {{action}}")],
            "none",
            [("green", None), ("red", 1)],
            mappings=(("0", "normal", "green"), ("1", "degraded", "red")),
        ),
        timeline(
            "Alerts behind them",
            "The lanewatch alerts firing in the same lanes; the degrade controller acts on these. "
            "Red: firing. A degrade with no alert above it is one the controller is holding or "
            "failed to restore.",
            [
                Query(
                    f"sum by (alertname, lane, severity) ({firing()})", "{{alertname}} {{lane}} {{severity}}"
                )
            ],
            "none",
            [("green", None), ("red", 1)],
        ),
        timeline(
            "Fast guard",
            "Whether the collector's fast guard fires for each lane's TTFT SLO: most of the lane's "
            "requests of the last seconds missed it, counted at their first token or while still "
            "waiting. Red: firing, its alert in Alertmanager beside the rules' own.",
            [Query(f"max by (lane, slo) ({sel(names.GUARD_FIRING, LANE)})", "{{lane}} {{slo}}")],
            "none",
            [("green", None), ("red", 1)],
            mappings=(("0", "quiet", "green"), ("1", "firing", "red")),
        ),
        timeseries(
            "Fast guard evidence",
            "Requests the fast guard judged in the window that decides now, and how many missed the "
            "SLO. Red from 3: the default floor of misses; the guard fires once they are also most of "
            "those judged. Misses that stay red with no shift: check the controller's policy and "
            "Alertmanager's route for action=degrade.",
            [
                Query(
                    f"sum by (lane, outcome) ({sel(names.GUARD_WINDOW_REQUESTS, LANE)})",
                    "{{lane}} {{outcome}}",
                )
            ],
            "none",
            [("green", None), ("red", 3)],
        ),
        timeseries(
            "Traffic shifted",
            "Share of a lane's traffic shifted to a faster lane. Orange above 0, red at 100%: the "
            "whole lane is served elsewhere, so the faster lane carries its load too; watch its "
            "queue.",
            [Query(sel(names.DEGRADE_SHIFT_RATIO, LANE), "{{lane}} → {{to_lane}}")],
            "percentunit",
            [("green", None), ("orange", 0.0001), ("red", 1)],
            w=8,
        ),
        timeseries(
            "max_tokens cap",
            "The max_tokens cap a degrade imposes per lane (0 = none). Red: answers are being cut "
            "short on purpose; it lifts when the lane restores.",
            [Query(sel(names.DEGRADE_MAX_TOKENS_CAP, LANE), "{{lane}}")],
            "none",
            [("green", None), ("red", 1)],
            w=8,
        ),
        timeseries(
            "Requests shed",
            "Requests the gateway refused with 429 to protect a lane, by request class. Red: "
            "clients of those classes get errors; expected for batch traffic during a degrade.",
            [
                Query(
                    f"sum by (lane, request_class) (rate({sel(names.GATEWAY_SHED_TOTAL, LANE)}[{RATE}]))",
                    "{{lane}} {{request_class}}",
                )
            ],
            "reqps",
            [("green", None), ("red", 0.0001)],
            w=8,
        ),
        timeseries(
            "Rescue",
            "Streamed requests whose first token was late, by what the gateway's rescue did: a second "
            "attempt on a faster lane that won (the client got its first token from there), lost or "
            "failed, or why none was sent (throttled by the bucket, the faster lane degraded, "
            "protecting or over its own SLO). Orange: a lane is late for some requests. Red from one "
            "a second: it is late for many; the guard should shift it within seconds, and throttled "
            "ones mean the bucket is spent and clients wait: check the lane and the guard's evidence.",
            [
                Query(
                    f"sum by (lane, to_lane, outcome) "
                    f"(rate({sel(names.GATEWAY_RESCUES_TOTAL, LANE)}[{RATE}]))",
                    "{{lane}} → {{to_lane}} {{outcome}}",
                )
            ],
            "reqps",
            [("green", None), ("orange", 0.0001), ("red", 1)],
            w=24,
        ),
    ]


def _controller_panels() -> list[Any]:
    return [
        timeseries(
            "Transitions",
            "Degrade actions applied and restored per lane (counts per interval). Red at 3 or more "
            "in an interval: the controller flaps; raise its hold time or recovery window.",
            [
                Query(
                    "sum by (lane, action, direction) "
                    f"(increase({sel(names.DEGRADE_TRANSITIONS_TOTAL, LANE)}[{RATE}]))",
                    "{{lane}} {{action}} {{direction}}",
                )
            ],
            "none",
            [("green", None), ("red", 3)],
            bars=True,
        ),
        timeseries(
            "Adapter failures",
            "Failed calls from the controller to a router adapter (gateway admin API, webhook, "
            "file). Red: any; the decided degrade did not reach the router, so check the adapter's "
            "URL, token and the router's logs.",
            [
                Query(
                    f"sum by (adapter) (increase({names.DEGRADE_ADAPTER_FAILURES_TOTAL}[{RATE}]))",
                    "{{adapter}}",
                )
            ],
            "none",
            [("green", None), ("red", 1)],
            bars=True,
        ),
        timeline(
            "Adapters in sync",
            "Whether each adapter's last apply of the current state succeeded. Red: the router "
            "does not hold what the controller decided; it retries every reconcile interval, and "
            "the adapter failures panel counts the misses.",
            [Query(f"max by (adapter) ({names.DEGRADE_ADAPTER_SYNCED})", "{{adapter}}")],
            "none",
            [("red", None), ("green", 1)],
            h=5,
            mappings=(("0", "out of sync", "red"), ("1", "in sync", "green")),
        ),
        timeseries(
            "Alertmanager notifications",
            "Webhook notifications the controller received per second, by outcome. Red: none at "
            "all while alerts fire means Alertmanager cannot reach the controller (route, bearer "
            "token, network).",
            [
                Query(
                    f"sum by (outcome) (rate({names.DEGRADE_NOTIFICATIONS_TOTAL}[{RATE}]))",
                    "{{outcome}}",
                )
            ],
            "reqps",
            [("red", None), ("green", 0.0001)],
        ),
        timeseries(
            "Degrades applied by the gateway",
            "Requests per second the gateway changed because of a degrade, by action. Red: none "
            "while a degrade is in force means the gateway is not applying it.",
            [
                Query(
                    f"sum by (lane, action) (rate({sel(names.GATEWAY_DEGRADE_APPLIED_TOTAL, LANE)}[{RATE}]))",
                    "{{lane}} {{action}}",
                )
            ],
            "reqps",
            [("red", None), ("green", 0.0001)],
        ),
    ]


def dashboard_degrade() -> Any:
    """The Degrade dashboard."""
    return dashboard(
        names.DASHBOARD_DEGRADE_UID,
        "lanewatch / Degrade",
        "The degrade controller's state timeline, transitions, adapter failures and the alerts behind them.",
        [*_state_panels(), *_controller_panels()],
    )
