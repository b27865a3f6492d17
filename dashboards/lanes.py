"""Lanes: is routing still buying latency (convergence), does latency still depend on the work (flatness)."""

from __future__ import annotations

from typing import Any

from lanewatch.exporters import names

from .diagnosis import diagnosis_panels
from .panels import Query, dashboard, timeseries
from .templating import LANE, RATE, REQUEST, sel


def _lane_panels() -> list[Any]:
    return [
        timeseries(
            "P99 TTFT per lane",
            "Each lane's P99 time to first token (recorded by the lanewatch rules over their analysis "
            "window). Red line at 2 s. The fast lane's line should sit well under the slow lane's; "
            "when they meet, see the convergence panel.",
            [Query(sel(names.LANE_TTFT_P99, LANE), "{{lane}}")],
            "s",
            [("green", None), ("red", 2)],
        ),
        timeseries(
            "Lane convergence: fast P99 / slow P99",
            "The fast lane's P99 TTFT as a share of the slow lane's. Orange above 60%; red at 80%, "
            "where LanewatchLaneConvergence fires after 10m: the fast lane no longer buys latency. "
            "Check what routes to it (rules, shifted traffic) and its queue.",
            [Query(sel(names.LANE_P99_CONVERGENCE_RATIO, LANE), "{{lane}} vs {{slow_lane}}")],
            "percentunit",
            [("green", None), ("orange", 0.6), ("red", 0.8)],
        ),
        timeseries(
            "Flatness: CV of mean E2E across request classes",
            "Standard deviation over mean of the per-class mean E2E, per lane. Healthy lanes show "
            "short and long requests taking different times (high CV). Red below 0.1, where "
            "LanewatchLatencyFlat fires after 15m: a fixed cost (queueing, a stall, a cold start) "
            "dominates every request; look at the fixed-cost share and the breakdown.",
            [Query(sel(names.LANE_FLATNESS_CV, LANE), "{{lane}}")],
            "none",
            [("red", None), ("green", 0.1)],
        ),
        timeseries(
            "Mean E2E per request class",
            "Mean end-to-end seconds of each request class per lane; the classes should fan out by "
            "the work they ask for. Red line at 30 s. Lines bunched together mean flat latency.",
            [Query(sel(names.CLASS_E2E_MEAN, LANE), "{{lane}} {{request_class}}")],
            "s",
            [("green", None), ("red", 30)],
        ),
    ]


def _fit_panels() -> list[Any]:
    return [
        timeseries(
            "E2E fit: fixed cost",
            "The fixed part of E2E = fixed + per_token × output tokens, fitted per lane over the "
            "collector's window. Red above 1 s: every request pays a second before any token work; "
            "look at queue, connect and prefill.",
            [Query(sel(names.FIT_FIXED_SECONDS, LANE), "{{lane}}")],
            "s",
            [("green", None), ("red", 1)],
            w=8,
        ),
        timeseries(
            "E2E fit: per-token cost",
            "Seconds per output token from the same fit: the decode speed users feel. Red above 50 ms "
            "(the TPOT SLO): decode is slow; see the Server & GPU dashboard.",
            [Query(sel(names.FIT_PER_TOKEN_SECONDS, LANE), "{{lane}}")],
            "s",
            [("green", None), ("red", 0.05)],
            w=8,
        ),
        timeseries(
            "E2E fit: fixed-cost share",
            "Fixed cost over mean E2E. Orange above 50%, red above 80%: latency no longer depends on "
            "the work, the flatness this dashboard watches for.",
            [Query(sel(names.FIT_FIXED_SHARE_RATIO, LANE), "{{lane}}")],
            "percentunit",
            [("green", None), ("orange", 0.5), ("red", 0.8)],
            w=8,
        ),
        timeseries(
            "Gateway traffic: asked lane → served lane",
            "Requests per second through the gateway by the lane a request asked for and the lane "
            "that served it (they differ while a degrade shifts traffic). Red: none, the gateway "
            "sees no traffic.",
            [
                Query(
                    f"sum by (lane, served_lane) (rate({sel(names.GATEWAY_REQUESTS_TOTAL, LANE)}[{RATE}]))",
                    "{{lane}} → {{served_lane}}",
                )
            ],
            "reqps",
            [("red", None), ("green", 0.001)],
        ),
        timeseries(
            "Requests per class",
            "Finished requests per second per lane and request class (probes and real traffic). Red: "
            "none, so the class comparisons above have nothing to compare.",
            [
                Query(
                    f"sum by (lane, request_class) (rate({sel(names.REQUESTS_TOTAL, REQUEST)}[{RATE}]))",
                    "{{lane}} {{request_class}}",
                )
            ],
            "reqps",
            [("red", None), ("green", 0.001)],
        ),
    ]


def dashboard_lanes() -> Any:
    """The Lanes dashboard."""
    return dashboard(
        names.DASHBOARD_LANES_UID,
        "lanewatch / Lanes",
        "Fast versus slow lanes: P99 TTFT and their convergence, flatness across request classes, "
        "and the fixed-cost versus per-token fit; the diagnosis's signals against its thresholds.",
        [*_lane_panels(), *_fit_panels(), *diagnosis_panels()],
    )
