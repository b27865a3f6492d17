"""Overview: are the SLOs met, how fast is the budget burning, what is firing, what is degraded."""

from __future__ import annotations

from typing import Any

from lanewatch.exporters import names

from .panels import Query, dashboard, stat, timeline, timeseries
from .templating import LANE, RATE, REQUEST, firing, sel


def _slo_panels() -> list[Any]:
    budget = sel(names.ERROR_BUDGET_RATIO, LANE)
    return [
        stat(
            "Error budget left (period)",
            "Share of each SLO's error budget still unspent over its period (28d by default), per lane "
            "and SLO. Red: the budget is spent, so the SLO is missed for the period; freeze risky "
            "changes and work the burn-rate alerts. Orange: under a quarter left.",
            [Query(sel(names.PERIOD_ERROR_BUDGET_REMAINING_RATIO, LANE), "{{lane}} {{slo}}")],
            "percentunit",
            [("red", None), ("orange", 0), ("green", 0.25)],
            w=12,
        ),
        stat(
            "SLO compliance (period)",
            "Share of good requests over the SLO period, per lane and SLO (1 − the period's error "
            "ratio). Red: below 99%, the loosest default objective; compare with each SLO's own "
            "objective in the budget panel, which is exact.",
            [
                Query(
                    f"1 - (\n{sel(names.PERIOD_BURN_RATE_RATIO, LANE)}\n* on (lane, slo)\n{budget}\n)",
                    "{{lane}} {{slo}}",
                )
            ],
            "percentunit",
            [("red", None), ("green", 0.99)],
            w=12,
        ),
        timeseries(
            "Burn rate",
            "How fast each SLO spends its error budget right now (the shortest window's error ratio "
            "over the budget): 1 spends it exactly over the period. Orange above 1; red above 13.44, "
            "where the page alert fires (1h and 5m both burning): open the Latency breakdown for the "
            "lane and find the phase that grew.",
            [Query(sel(names.CURRENT_BURN_RATE_RATIO, LANE), "{{lane}} {{slo}}")],
            "short",
            [("green", None), ("orange", 1), ("red", 13.44)],
        ),
        timeseries(
            "Period burn rate",
            "Average burn rate over the whole SLO period. Red above 1: at this pace the period ends "
            "over budget; plan capacity or loosen the objective deliberately.",
            [Query(sel(names.PERIOD_BURN_RATE_RATIO, LANE), "{{lane}} {{slo}}")],
            "short",
            [("green", None), ("red", 1)],
        ),
        timeseries(
            "Goodput per lane",
            "Share of requests that met every latency SLO of the lane they were routed to and did "
            "not fail (a shed request is a miss; a request shifted to another lane counts for the "
            "lane it was routed to), over the spec's analysis window; tap = user traffic through the "
            "gateway, probe = the prober. Orange below 99%, red below 90%: users are getting answers "
            "too late; a degrade that helps lifts the tap line while the probe line stays down.",
            [Query(sel(names.LANE_GOODPUT_RATIO, LANE), "{{lane}} {{source}}")],
            "percentunit",
            [("red", None), ("orange", 0.9), ("green", 0.99)],
        ),
        timeseries(
            "Goodput per request class",
            "Goodput (as in the panel beside) per lane, request class and source. Red below 90%: "
            "the class named misses its SLOs most; compare its TTFT and TPOT on the Latency "
            "breakdown dashboard.",
            [Query(sel(names.GOODPUT_RATIO, LANE), "{{lane}} {{request_class}} {{source}}")],
            "percentunit",
            [("red", None), ("orange", 0.9), ("green", 0.99)],
        ),
    ]


def _alert_panels() -> list[Any]:
    return [
        stat(
            "Pages firing",
            "lanewatch alerts firing with severity page. Red: someone should be on it; each alert's "
            "runbook_url and dashboard_url say where to start.",
            [Query(f"count({firing('page')}) or vector(0)")],
            "none",
            [("green", None), ("red", 1)],
            graph=False,
        ),
        stat(
            "Tickets firing",
            "lanewatch alerts firing with severity ticket: slow burns and warnings. Orange or red: "
            "look within the working day; red at 5 or more.",
            [Query(f"count({firing('ticket')}) or vector(0)")],
            "none",
            [("green", None), ("orange", 1), ("red", 5)],
            graph=False,
        ),
        stat(
            "Lanes degraded",
            "Lanes where the degrade controller has an action in force (shift, cap, shed). Red: traffic "
            "is being degraded on purpose; see the Degrade dashboard for why and until when.",
            [Query(f"count(max by (lane) ({sel(names.DEGRADE_ACTIVE, LANE)}) > 0) or vector(0)")],
            "none",
            [("green", None), ("red", 1)],
            graph=False,
        ),
        stat(
            "Requests/s",
            "Finished requests per second (probes and real traffic) in the selected lanes. Red: none "
            "at all, so every SLO panel is blind; check the prober, the gateway and the scrape.",
            [Query(f"sum(rate({sel(names.REQUESTS_TOTAL, REQUEST)}[{RATE}]))")],
            "reqps",
            [("red", None), ("green", 0.001)],
        ),
        timeline(
            "Alerts firing",
            "Which lanewatch alerts fired when, by alert, lane and severity. Red: firing; follow the "
            "alert's runbook.",
            [
                Query(
                    f"sum by (alertname, lane, severity) ({firing()})", "{{alertname}} {{lane}} {{severity}}"
                )
            ],
            "none",
            [("green", None), ("red", 1)],
            h=8,
        ),
        timeline(
            "Degrade state",
            "Degrade actions in force per lane (1 = active). Red: a lane is degraded; it restores when "
            "the alert behind it resolves and the hold time passes.",
            [Query(f"max by (lane, action) ({sel(names.DEGRADE_ACTIVE, LANE)})", "{{lane}} {{action}}")],
            "none",
            [("green", None), ("red", 1)],
            h=6,
            mappings=(("0", "normal", "green"), ("1", "degraded", "red")),
        ),
        timeseries(
            "Error ratio by lane",
            "Failed requests over all requests per lane, any error kind. Orange above 0.1%, red above "
            "1%: the availability SLO burns; the error_kind breakdown is on the Latency breakdown "
            "dashboard.",
            [
                Query(
                    f"sum by (lane) (rate({sel(names.REQUEST_ERRORS_TOTAL, REQUEST)}[{RATE}]))\n/\n"
                    f"sum by (lane) (rate({sel(names.REQUESTS_TOTAL, REQUEST)}[{RATE}]))",
                    "{{lane}}",
                )
            ],
            "percentunit",
            [("green", None), ("orange", 0.001), ("red", 0.01)],
            w=24,
        ),
    ]


def dashboard_overview() -> Any:
    """The Overview dashboard."""
    return dashboard(
        names.DASHBOARD_OVERVIEW_UID,
        "lanewatch / Overview",
        "SLO compliance, error budgets, burn rates, firing alerts and degrade state, per lane.",
        [*_slo_panels(), *_alert_panels()],
    )
