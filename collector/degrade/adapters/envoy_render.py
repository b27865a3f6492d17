"""Envoy's route file from the operator's route template and the degrade state; pure, no I/O.

The template (deploy/envoy/routes.template.yaml) holds an Envoy RouteConfiguration
(`route_config`), the request classes a shed may refuse (`classes`, each a route match the
operator trusts) and the `retry_after_s` of a shed answer. A route that serves a lane is
marked `metadata.filter_metadata.lanewatch.lane` and sends to the lane's cluster
(`route.cluster`); the marked routes are the only ones a render changes:

- shift `p%` to lane T: the route's `cluster` becomes `weighted_clusters` of the lane's
  cluster (weight 1000 - 10p) and T's cluster (10p). Where the lanes' models say a moved
  request may need another model (`ModelRewrite`), T's cluster weight carries the Lua
  script that rewrites the body's `model` (envoy_lua.py); else the body is sent unchanged.
- shed class K: a route is put before the lane's route, matching what it matches and K's
  rule as well, answering `429` with `retry-after` from Envoy itself (`direct_response`);
  where both have a path rule, the lane's stays and K's becomes a `:path` header matcher.
- a shift to T where T sheds K: a request shifted to T obeys T's shed, as at the gateway. A
  shed route for K before the lane's route takes the shifted share of K (`runtime_fraction`
  under a partial shift), and a route after it keeps the rest of K on the lane's cluster.

- shed class K defined by work (`{work: {min, max}}`), and cap: no route; the lane's routes
  carry the Lua script that reads the body's work and sheds or bounds it (envoy_work.py).

The rendered routes carry the same metadata (`shed` names the class), so what Envoy holds
reads back into lanes (`held_lanes`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from lanewatch.collector.common.validation import check_class_name, check_lane_name
from lanewatch.collector.degrade_state.served_models import ServedModels
from lanewatch.collector.degrade_state.wire import LaneDegrade

from .base import AdapterError
from .envoy_lua import LUA_FILTER, LUA_TYPE, needs_rewrite, rewrite_config
from .envoy_work import attach_work, check_work_rule, held_work, is_work_class

__all__ = [
    "ROUTE_TYPE",
    "EnvoyTemplate",
    "ModelRewrite",
    "held_lanes",
    "parse_template",
    "render",
    "render_text",
    "rewrites_model",
    "shed_match",
    "validation_bootstrap",
]

ROUTE_TYPE = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
META = "lanewatch"
WEIGHT_TOTAL = 1000  # weights in tenths of a percent
BUFFER_MARGIN = 64 * 1024  # what a rewriting route buffers beyond the rewrite's bound
_PATH_KEYS = ("prefix", "path", "safe_regex", "path_separated_prefix", "path_match_policy")
_CLASS_KEYS = frozenset({*_PATH_KEYS, "headers", "query_parameters"})
_TOP_KEYS = frozenset({"route_config", "classes", "retry_after_s"})


@dataclass(frozen=True)
class EnvoyTemplate:
    """A parsed route template: the route configuration, lane clusters and class rules."""

    route_config: dict[str, Any]
    clusters: dict[str, str]  # lane -> its cluster
    classes: dict[str, dict[str, Any]]  # class -> match fragment
    retry_after_s: int = 30

    @property
    def name(self) -> str:
        """The route configuration's name (the bootstrap's `rds.route_config_name`)."""
        return str(self.route_config["name"])


@dataclass(frozen=True)
class ModelRewrite:
    """The lanes' models (lane -> what it serves) and the largest body the rewrite buffers."""

    lanes: Mapping[str, ServedModels]
    max_bytes: int = 1024 * 1024


def _bad(message: str) -> AdapterError:
    return AdapterError(f"route template: {message}", retryable=False)


def parse_template(text: str) -> EnvoyTemplate:
    """The template from its YAML text; AdapterError naming the key that is wrong."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _bad(f"not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise _bad("must be a mapping with `route_config`")
    if unknown := sorted(set(data) - _TOP_KEYS):
        raise _bad(f"unknown keys {unknown}; expected {sorted(_TOP_KEYS)}")
    rc = data.get("route_config")
    if not isinstance(rc, dict) or not isinstance(rc.get("name"), str) or not rc["name"]:
        raise _bad("route_config must be a RouteConfiguration with a `name`")
    retry = data.get("retry_after_s", 30)
    if isinstance(retry, bool) or not isinstance(retry, int) or not 0 <= retry <= 86400:
        raise _bad(f"retry_after_s: {retry!r} is not whole seconds 0..86400")
    return EnvoyTemplate(rc, _lane_clusters(rc), _classes(data.get("classes") or {}), retry)


def _routes(rc: Mapping[str, Any]) -> list[tuple[str, list[Any]]]:
    hosts = rc.get("virtual_hosts")
    if not isinstance(hosts, list) or not all(isinstance(h, dict) for h in hosts):
        raise _bad("route_config.virtual_hosts must be a list of virtual hosts")
    out = []
    for i, host in enumerate(hosts):
        routes = host.get("routes", [])
        if not isinstance(routes, list) or not all(isinstance(r, dict) for r in routes):
            raise _bad(f"route_config.virtual_hosts.{i}.routes must be a list of routes")
        out.append((f"route_config.virtual_hosts.{i}.routes", routes))
    return out


def _mark(route: Mapping[str, Any]) -> dict[str, Any] | None:
    meta = (route.get("metadata") or {}).get("filter_metadata", {}).get(META)
    return meta if isinstance(meta, dict) else None


def _lane_clusters(rc: Mapping[str, Any]) -> dict[str, str]:
    clusters: dict[str, str] = {}
    for where, routes in _routes(rc):
        for j, route in enumerate(routes):
            mark = _mark(route)
            if mark is None:
                continue
            at = f"{where}.{j}"
            lane, cluster = mark.get("lane"), (route.get("route") or {}).get("cluster")
            if set(mark) != {"lane"} or not isinstance(lane, str):
                raise _bad(f"{at}: metadata.filter_metadata.lanewatch must be {{lane: NAME}} alone")
            try:
                check_lane_name(lane)
            except ValueError as exc:
                raise _bad(f"{at}: {exc}") from None
            if not isinstance(cluster, str) or "match" not in route:
                raise _bad(f"{at}: a lane's route needs a `match` and `route.cluster` (its lane's cluster)")
            if clusters.setdefault(lane, cluster) != cluster:
                raise _bad(f"{at}: lane {lane!r} sends to {cluster!r} here and {clusters[lane]!r} elsewhere")
    if not clusters:
        raise _bad("no route is marked metadata.filter_metadata.lanewatch.lane")
    return clusters


def _classes(raw: object) -> dict[str, dict[str, Any]]:
    if not isinstance(raw, dict):
        raise _bad("classes must map a class name to its match rule")
    out = {}
    for name, rule in raw.items():
        try:
            check_class_name(str(name))
        except ValueError as exc:
            raise _bad(f"classes: {exc}") from None
        if isinstance(rule, dict) and is_work_class(rule):
            if (wrong := check_work_rule(str(name), rule)) is not None:
                raise _bad(wrong)
            out[str(name)] = rule
            continue
        if not isinstance(rule, dict) or not rule or set(rule) - _CLASS_KEYS:
            raise _bad(f"classes.{name}: a match rule of {sorted(_CLASS_KEYS)}, or `work: {{min, max}}`")
        if len([k for k in rule if k in _PATH_KEYS]) > 1:
            raise _bad(f"classes.{name}: one path rule at most")
        out[str(name)] = rule
    return out


def render(
    template: EnvoyTemplate, lanes: Mapping[str, LaneDegrade], rewrite: ModelRewrite | None = None
) -> dict[str, Any]:
    """The RouteConfiguration that makes Envoy hold `lanes`; AdapterError for a state it cannot hold.

    With `rewrite`, a shift between lanes whose models differ rewrites the moved requests' model.
    """
    _check_state(template, lanes)
    rc = copy.deepcopy(template.route_config)
    for host in rc.get("virtual_hosts", []):
        out: list[dict[str, Any]] = []
        for route in host.get("routes", []):
            mark = _mark(route)
            spec = lanes.get(mark["lane"]) if mark else None
            if mark is None or spec is None:
                out.append(route)
                continue
            out += [
                _shed_route(template, route, mark["lane"], c)
                for c in spec.shed_classes
                if not is_work_class(template.classes[c])
            ]
            out += _shifted_shed_routes(template, route, mark["lane"], lanes)
            out.append(_shift_route(template, route, mark["lane"], spec, rewrite))
        max_bytes = rewrite.max_bytes if rewrite is not None else ModelRewrite({}).max_bytes
        attach_work(
            template.classes,
            template.clusters,
            out,
            lanes,
            max_bytes=max_bytes,
            retry_after_s=template.retry_after_s,
        )
        host["routes"] = out
    return rc


def _check_state(template: EnvoyTemplate, lanes: Mapping[str, LaneDegrade]) -> None:
    known = ", ".join(sorted(template.clusters))
    for lane, spec in lanes.items():
        if lane not in template.clusters:
            raise AdapterError(
                f"lane {lane!r} has no route in the route template (lanes: {known})", retryable=False
            )
        if "shift" in spec.active() and spec.shift_to not in template.clusters:
            raise AdapterError(
                f"lanes.{lane}.shift_to: lane {spec.shift_to!r} has no route in the route template",
                retryable=False,
            )
        for cls in spec.shed_classes:
            if cls not in template.classes:
                raise AdapterError(
                    f"lanes.{lane}.shed_classes: class {cls!r} has no match rule in the route template's "
                    f"`classes` (defined: {', '.join(sorted(template.classes)) or 'none'})",
                    retryable=False,
                )


def _moved(spec: LaneDegrade) -> int:
    """The weight, in tenths of a percent, that a shift sends to the lane it shifts to."""
    if "shift" not in spec.active() or spec.shift_to is None:
        return 0
    return round(float(spec.shift_percent) * WEIGHT_TOTAL / 100)


def _shifted_shed_routes(
    template: EnvoyTemplate, route: dict[str, Any], lane: str, lanes: Mapping[str, LaneDegrade]
) -> list[dict[str, Any]]:
    """The routes that make a request shifted from `lane` obey the shed of the lane serving it.

    As at the gateway, a request shifted to T is shed when T sheds its class. For each class T
    sheds and `lane` does not, a shed route takes the shifted share of the class's requests
    (all of them under a full shift; else a `runtime_fraction` of the moved weight), and a
    route after it keeps the rest on `lane`'s own cluster, so none of the class reaches T.
    """
    spec = lanes[lane]
    moved, target = _moved(spec), spec.shift_to
    there = lanes.get(target) if target is not None and target != lane else None
    if there is None or moved <= 0:
        return []
    out: list[dict[str, Any]] = []
    for cls in there.shed_classes:
        if cls in spec.shed_classes or is_work_class(template.classes[cls]):
            continue  # shed on its own lane already, shifted or not; or by the script on T's weight
        shed = _shed_route(template, route, lane, cls, serving=target)
        if moved >= WEIGHT_TOTAL:
            out.append(shed)
            continue
        if "runtime_fraction" in route["match"]:
            raise AdapterError(
                f"lane {lane!r}: its route's match has a runtime_fraction, so a partial shift cannot "
                f"shed the share of class {cls!r} that lane {target!r} would serve",
                retryable=False,
            )
        keep = {**route, "name": f"lanewatch-keep-{lane}-{cls}", "match": copy.deepcopy(shed["match"])}
        shed["match"]["runtime_fraction"] = {
            # Envoy draws a number per request: this route takes `moved` in 1000 of them.
            "default_value": {"numerator": moved * 10, "denominator": "TEN_THOUSAND"},
            "runtime_key": f"lanewatch.shift.{lane}",
        }
        out += [shed, keep]
    return out


def _shift_route(
    template: EnvoyTemplate,
    route: dict[str, Any],
    lane: str,
    spec: LaneDegrade,
    rewrite: ModelRewrite | None,
) -> dict[str, Any]:
    if "shift" not in spec.active() or spec.shift_to is None:
        return route
    moved = _moved(spec)
    action = {k: v for k, v in route["route"].items() if k != "cluster"}
    target: dict[str, Any] = {"name": template.clusters[spec.shift_to], "weight": moved}
    if rewrite is not None:
        models = rewrite.lanes.get(spec.shift_to)
        if models is not None and needs_rewrite(rewrite.lanes.get(lane), models):
            target["typed_per_filter_config"] = {LUA_FILTER: rewrite_config(models, rewrite.max_bytes)}
    action["weighted_clusters"] = {
        "clusters": [{"name": template.clusters[lane], "weight": WEIGHT_TOTAL - moved}, target]
    }
    shifted = {**route, "route": action}
    if rewrite is not None and "typed_per_filter_config" in target:
        # The script must see a body at its bound whole, and Envoy refuses to buffer one that
        # fills its buffer limit (measured: a body of exactly the limit, or the limit less one, is
        # refused), so this route's limit is the bound and a margin; above that, Envoy's own 413
        # is answered by the script (envoy_lua.py) as its own.
        held = route.get("request_body_buffer_limit")
        need = rewrite.max_bytes + BUFFER_MARGIN
        shifted["request_body_buffer_limit"] = max(need, int(held)) if isinstance(held, int) else need
    return shifted


def _shed_route(
    template: EnvoyTemplate, route: dict[str, Any], lane: str, cls: str, serving: str | None = None
) -> dict[str, Any]:
    """A route before `lane`'s that answers 429 to class `cls`; `serving`: the lane a shift sends
    it to, whose shed this is (read back as that lane's, not `lane`'s)."""
    match = shed_match(route["match"], template.classes[cls], f"lane {lane!r}, class {cls!r}")
    body = {
        "error": {
            "message": f"shed by lanewatch degrade: class {cls}",
            "type": "rate_limit_error",
            "code": 429,
        }
    }
    mark = {"lane": lane, "shed": cls} if serving is None else {"lane": lane, "shed": cls, "serving": serving}
    return {
        "name": f"lanewatch-shed-{lane}-{cls}"
        if serving is None
        else f"lanewatch-shed-{lane}-to-{serving}-{cls}",
        "match": match,
        "metadata": {"filter_metadata": {META: mark}},
        "direct_response": {
            "status": 429,
            "body": {"inline_string": json.dumps(body, separators=(",", ":"))},
        },
        "response_headers_to_add": [
            _header("retry-after", str(template.retry_after_s)),
            _header("content-type", "application/json"),
            _header("x-lanewatch-degraded", "shed"),
        ],
    }


def shed_match(lane_match: Mapping[str, Any], rule: Mapping[str, Any], what: str) -> dict[str, Any]:
    """The lane route's match and the class rule together: a request must pass both.

    A route has one path rule. When both have one, the lane's stays the route's path rule
    and the class's becomes a `:path` header matcher (a path template, which has no such
    form, swaps places with the lane's); a lane path rule that takes every path (`prefix: /`)
    is replaced by the class's. Both rules see the whole request path, as Envoy matches it.
    """
    match = copy.deepcopy(dict(lane_match))
    extra = {k: copy.deepcopy(v) for k, v in rule.items() if k not in _PATH_KEYS}
    ours = next(((k, rule[k]) for k in _PATH_KEYS if k in rule), None)
    theirs = next(((k, match[k]) for k in _PATH_KEYS if k in match), None)
    if ours is not None:
        if theirs is None or (theirs[0] == "prefix" and theirs[1] in ("", "/")):
            for key in _PATH_KEYS:
                match.pop(key, None)
            match[ours[0]] = copy.deepcopy(ours[1])
        else:
            _check_overlap(theirs, ours, what, match.get("case_sensitive") is not False)
            if ours[0] != "path_match_policy":
                header = _path_header(*ours, case_sensitive=True)
            elif theirs[0] != "path_match_policy":
                header = _path_header(*theirs, case_sensitive=match.get("case_sensitive") is not False)
                match.pop(theirs[0])
                match[ours[0]] = copy.deepcopy(ours[1])
            else:
                raise AdapterError(
                    f"{what}: the lane's route and the class both match a path template "
                    "(path_match_policy); Envoy's route holds one",
                    retryable=False,
                )
            extra["headers"] = [header, *extra.get("headers", [])]
    for key, value in extra.items():
        match[key] = [*match.get(key, []), *value] if isinstance(value, list) else value
    return match


def _check_overlap(lane: tuple[str, Any], cls: tuple[str, Any], what: str, case_sensitive: bool) -> None:
    """AdapterError where two plain path rules match no path together: the shed would refuse nothing."""
    a, b = lane[1], cls[1]
    if not (isinstance(a, str) and isinstance(b, str)):
        return
    if not case_sensitive:
        a, b = a.lower(), b.lower()
    # a path_separated_prefix matches fewer paths than the same prefix: disjoint as a prefix, disjoint
    kinds = (_as_prefix(lane[0]), _as_prefix(cls[0]))
    disjoint = {
        ("prefix", "prefix"): not (a.startswith(b) or b.startswith(a)),
        ("path", "path"): a != b,
        ("prefix", "path"): not b.startswith(a),
        ("path", "prefix"): not a.startswith(b),
    }.get(kinds, False)
    if disjoint:
        raise AdapterError(
            f"{what}: the class's path rule {{{cls[0]}: {cls[1]!r}}} and the lane route's "
            f"{{{lane[0]}: {lane[1]!r}}} match no path together, so the shed would refuse nothing; "
            "write the class's rule for the whole request path of each lane (a safe_regex, say)",
            retryable=False,
        )


def _as_prefix(key: str) -> str:
    return "prefix" if key == "path_separated_prefix" else key


def _re2_literal(text: str) -> str:
    """`text` as an RE2 pattern matching it literally."""
    return "".join("\\" + c if c in "\\.^$|?*+()[]{}" else c for c in text)


def _path_header(key: str, value: Any, *, case_sensitive: bool) -> dict[str, Any]:
    """A route path rule as a `:path` header matcher; `:path` holds the query too, which the
    `path`, `safe_regex` and `path_separated_prefix` rules do not look at, so it may follow."""
    fold = "" if case_sensitive else "(?i)"
    query = r"(\?.*)?"
    if key == "prefix":
        string: dict[str, Any] = {"prefix": value}
        if not case_sensitive:
            string["ignore_case"] = True
    elif key == "path":
        string = {"safe_regex": {"regex": fold + _re2_literal(str(value)) + query}}
    elif key == "path_separated_prefix":
        string = {"safe_regex": {"regex": fold + _re2_literal(str(value)) + r"([/?].*)?"}}
    else:  # safe_regex: a RegexMatcher, matched against the path without its query
        string = {"safe_regex": {**value, "regex": f"(?:{value['regex']}){query}"}}
    return {"name": ":path", "string_match": string}


def _header(key: str, value: str) -> dict[str, Any]:
    return {"header": {"key": key, "value": value}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}


def render_text(route_config: Mapping[str, Any]) -> str:
    """The route file Envoy reads: one RouteConfiguration resource, stable text for equal input."""
    resource = {"@type": ROUTE_TYPE, **route_config}
    head = "# generated by lanewatch degrade from the route template: do not edit\n"
    return head + yaml.safe_dump({"resources": [resource]}, sort_keys=True, default_flow_style=False)


def validation_bootstrap(route_config: Mapping[str, Any]) -> dict[str, Any]:
    """A bootstrap holding `route_config` inline (clusters stubbed), for `envoy --mode validate`.

    Its listener has the Lua filter, as the served bootstrap must, so the model rewrite's
    script is compiled here too.
    """
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
        "HttpConnectionManager",
        "stat_prefix": "validate",
        "route_config": dict(route_config),
        "http_filters": [
            {"name": LUA_FILTER, "typed_config": {"@type": LUA_TYPE}},
            {
                "name": "envoy.filters.http.router",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                },
            },
        ],
    }
    listener = {
        "name": "validate",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}},
        "filter_chains": [
            {"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}
        ],
    }
    clusters = [
        {"name": c, "type": "STATIC", "connect_timeout": "1s"} for c in sorted(_cluster_names(route_config))
    ]
    return {
        "node": {"id": "validate", "cluster": "validate"},
        "static_resources": {"listeners": [listener], "clusters": clusters},
    }


def rewrites_model(rc: Mapping[str, Any]) -> bool:
    """Some route or cluster weight of the route configuration carries the Lua script (a shift's
    model rewrite, or a shed by work): Envoy's listener needs the Lua filter."""
    for host in rc.get("virtual_hosts", []):
        for route in host.get("routes", []):
            if LUA_FILTER in (route.get("typed_per_filter_config") or {}):
                return True
            for c in ((route.get("route") or {}).get("weighted_clusters") or {}).get("clusters", []):
                if LUA_FILTER in (c.get("typed_per_filter_config") or {}):
                    return True
    return False


def _cluster_names(rc: Mapping[str, Any]) -> set[str]:
    """Every cluster the route configuration names, wherever it names one.

    Route actions (`cluster`, `weighted_clusters`), mirrors (`request_mirror_policies`, on a
    route or a virtual host), and a filter's per-route config (a gRPC service's
    `cluster_name`): validation refuses a name it has no cluster for, so each is stubbed.
    A stub too many is harmless there.
    """
    names: set[str] = set()

    def walk(node: object, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("cluster", "cluster_name") and isinstance(v, str) and v:
                    names.add(v)
                walk(v, k)
        elif isinstance(node, list):
            for item in node:
                if key == "clusters" and isinstance(item, dict) and isinstance(item.get("name"), str):
                    names.add(item["name"])  # a weighted cluster
                walk(item, key)

    walk(dict(rc))
    return names


def held_lanes(template: EnvoyTemplate, route_config: Mapping[str, Any]) -> dict[str, LaneDegrade]:
    """The degrade a route configuration (as Envoy's config dump shows it) holds, by lane."""
    lane_of = {cluster: lane for lane, cluster in template.clusters.items()}
    shift: dict[str, tuple[str, float]] = {}
    shed: dict[str, set[str]] = {}
    caps: dict[str, int] = {}
    for host in route_config.get("virtual_hosts", []):
        for route in host.get("routes", []):
            mark = _mark(route) or {}
            lane = mark.get("lane")
            if not isinstance(lane, str):
                continue
            if isinstance(mark.get("shed"), str) and "serving" not in mark:  # a shifted request's
                shed.setdefault(lane, set()).add(mark["shed"])
            for owner, held in held_work(route):
                if isinstance(held, str):
                    shed.setdefault(owner, set()).add(held)
                else:
                    caps[owner] = held
            weights = ((route.get("route") or {}).get("weighted_clusters") or {}).get("clusters", [])
            total = sum(int(c.get("weight", 0)) for c in weights)
            for c in weights:
                to = lane_of.get(c.get("name", ""))
                if total and to not in (None, lane) and int(c.get("weight", 0)) > 0:
                    shift[lane] = (str(to), round(int(c["weight"]) * 100 / total, 1))
    out = {}
    for lane in sorted({*shift, *shed, *caps}):
        to, pct = shift.get(lane, (None, 0))
        out[lane] = LaneDegrade(
            shift_to=to,
            shift_percent=pct,
            cap_max_tokens=caps.get(lane),
            shed_classes=tuple(shed.get(lane, ())),
        )
    return out
