"""A shed and a cap by work through Envoy: classes by a request's work, and caps that bound it. Pure.

A class in the template's `classes` may be `{work: {min, max}}` instead of a route match: a
request is of it when its work (max_tokens x `n` or `best_of` x prompts, read from the body as
the gateway reads it, collector/openai_api/request_reading.py) lies in the range. No route match can
read a body, so such a class has no shed route: the Lua script (envoy_lua.py) rides on each
route that serves a lane as its per-route config, on the route itself or on each cluster weight
of a shift, with the ranges of the work classes shed there. As at the gateway, a request routed
to lane L and served by lane X is shed when L or X sheds its class: a weight to X carries L's
ranges and X's. A cap (`cap_max_tokens`) rides the same way: the script bounds the work by the
smaller cap of L and X, as degrade_state.cap_max_tokens does (max_tokens at most floor(cap /
(sequences x prompts)); sequences x prompts over the cap is a 429). The ranges and caps name the
lane that set them, so what Envoy holds reads back into lanes (`held_work`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from lanewatch.collector.classify.rules import ReadingConfig
from lanewatch.collector.degrade_state.wire import LaneDegrade

from .base import AdapterError
from .envoy_lua import LUA_FILTER, class_literal, work_config

__all__ = ["WORK_KEY", "attach_work", "check_work_rule", "held_work", "is_work_class"]

WORK_KEY: Final = "work"
MISSING_MAX_TOKENS: Final = ReadingConfig().missing_max_tokens  # the gateway's default reading
BUFFER_MARGIN: Final = 64 * 1024  # what a reading route buffers beyond the script's bound


def is_work_class(rule: Mapping[str, Any]) -> bool:
    """Whether a template class rule classes by work rather than by a route match."""
    return WORK_KEY in rule


def check_work_rule(name: str, rule: Mapping[str, Any]) -> str | None:
    """What is wrong with a work class rule (`{work: {min, max}}` alone), or None."""
    if set(rule) != {WORK_KEY}:
        return f"classes.{name}: a work rule stands alone (`work: {{min, max}}`), with no route match"
    rng = rule[WORK_KEY]
    if not isinstance(rng, dict) or not rng or set(rng) - {"min", "max"}:
        return f"classes.{name}.work: give min, max or both"
    for key, value in rng.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return f"classes.{name}.work.{key}: {value!r} is not a whole number >= 0"
    if rng.get("min", 0) > rng.get("max", rng.get("min", 0)):
        return f"classes.{name}.work: min {rng['min']} > max {rng['max']}"
    return None


def _ranges(classes: Mapping[str, Mapping[str, Any]], lane: str, spec: LaneDegrade | None) -> list[list[Any]]:
    out = []
    for cls in spec.shed_classes if spec is not None else ():
        rule = classes.get(cls, {})
        if is_work_class(rule):
            rng = rule[WORK_KEY]
            out.append([class_literal(cls), rng.get("min", 0), rng.get("max", -1), lane])
    return out


def _targets(route: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Where a per-route config goes on `route` (itself, or each cluster weight), with its cluster."""
    action = route.get("route")
    if not isinstance(action, dict):
        return
    weights = (action.get("weighted_clusters") or {}).get("clusters")
    if isinstance(weights, list):
        for weight in weights:
            yield weight, str(weight.get("name", ""))
    elif isinstance(action.get("cluster"), str):
        yield route, action["cluster"]


def _caps(lane: str, spec: LaneDegrade | None) -> list[list[Any]]:
    return [[lane, spec.cap_max_tokens]] if spec is not None and spec.cap_max_tokens is not None else []


def attach_work(
    classes: Mapping[str, Mapping[str, Any]],
    clusters: Mapping[str, str],
    routes: list[dict[str, Any]],
    lanes: Mapping[str, LaneDegrade],
    *,
    max_bytes: int,
    retry_after_s: int,
) -> None:
    """Put the script on each lane route in `routes` whose lanes shed a work class or cap the work."""
    lane_of = {cluster: lane for lane, cluster in clusters.items()}
    for route in routes:
        mark = ((route.get("metadata") or {}).get("filter_metadata") or {}).get("lanewatch")
        if not isinstance(mark, dict) or not isinstance(mark.get("lane"), str) or "direct_response" in route:
            continue
        lane: str = mark["lane"]
        own, own_cap = _ranges(classes, lane, lanes.get(lane)), _caps(lane, lanes.get(lane))
        read = False
        for target, cluster in _targets(route):
            serving: str = lane_of.get(cluster, lane)
            there = _ranges(classes, serving, lanes.get(serving)) if serving != lane else []
            there_cap = _caps(serving, lanes.get(serving)) if serving != lane else []
            if not (own or there or own_cap or there_cap):
                continue
            per = target.setdefault("typed_per_filter_config", {})
            per[LUA_FILTER] = work_config(
                per.get(LUA_FILTER),
                own + there,
                own_cap + there_cap,
                max_bytes,
                retry_after_s,
                MISSING_MAX_TOKENS,
            )
            read = True
        if read:  # the script reads the body whole: the route buffers it (see envoy_render._shift_route)
            held = route.get("request_body_buffer_limit")
            need = max_bytes + BUFFER_MARGIN
            route["request_body_buffer_limit"] = max(need, int(held)) if isinstance(held, int) else need


def held_work(route: Mapping[str, Any]) -> Iterator[tuple[str, str | int]]:
    """(lane, class) of each shed by work, and (lane, cap) of each cap, a route (as Envoy's config
    dump shows it) holds."""
    configs = [route.get("typed_per_filter_config") or {}]
    weights = ((route.get("route") or {}).get("weighted_clusters") or {}).get("clusters") or []
    configs += [w.get("typed_per_filter_config") or {} for w in weights if isinstance(w, dict)]
    for per in configs:
        ctx = (per.get(LUA_FILTER) or {}).get("filter_context") or {}
        for entry in ctx.get("shed") or []:
            if isinstance(entry, list) and len(entry) == 4:
                try:
                    yield str(entry[3]), str(json.loads(entry[0]))
                except ValueError:
                    raise AdapterError(
                        f"unreadable shed by work in Envoy's routes: {entry!r}", retryable=True
                    ) from None
        for entry in ctx.get("caps") or []:
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], int | float):
                yield str(entry[0]), int(entry[1])
