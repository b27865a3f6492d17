"""The demo's Envoy: one bootstrap with the degrade adapter's file-based routes and the access
logger, a route template for the demo's lanes, and the read-back of what Envoy holds.

The bootstrap is deploy/envoy/bootstrap.yaml (routes from the file the `envoy` adapter writes)
with the access logger, trace sampling and request ids of deploy/envoy/access-log.yaml, on
loopback ports, its lanes' clusters over TLS to the simulators. Pure functions, but `held_state`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from lanewatch.collector.common.headers import CLASS_HEADER, LANE_HEADER, MODEL_HEADER
from lanewatch.collector.degrade.adapters.base import AdapterError
from lanewatch.collector.degrade.adapters.envoy import EnvoyAdapter, EnvoySettings
from lanewatch.collector.degrade.adapters.envoy_render import parse_template, render, render_text
from lanewatch.collector.degrade.adapters.files import write_atomic

from .configs import (
    DEPLOY_DIR,
    LANES,
    MODEL,
    Layout,
    TemplateError,
    envoy_adapter_entry,
    read_template,
    write_private,
)

__all__ = [
    "ROUTE_CONFIG", "demo_bootstrap", "demo_route_template", "held_state", "send_to_collector",
    "write_envoy_configs",
]  # fmt: skip

ROUTE_CONFIG: Final = "lanes"  # the template's route_config.name, the bootstrap's rds name
COLLECTOR_CLUSTER: Final = "lanewatch_collector"
_TLS: Final = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"


def _hcm(config: dict[str, Any], name: str) -> dict[str, Any]:
    try:
        hcm: dict[str, Any] = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
            "typed_config"
        ]
    except (KeyError, IndexError, TypeError):
        raise TemplateError(f"{name}: no http_connection_manager in its first listener") from None
    return hcm


def _endpoint(cluster: dict[str, Any]) -> dict[str, Any]:
    address: dict[str, Any] = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"][
        "address"
    ]["socket_address"]
    return address


def _loopback(port: int) -> dict[str, Any]:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def send_to_collector(
    hcm: dict[str, Any], token: str | None = None, cluster: str = COLLECTOR_CLUSTER
) -> None:
    """Point the access log's and the tracer's OTLP/HTTP exports (an HttpConnectionManager's) at
    `cluster`; with `token`, the collector's ingest token, every call carries it as a bearer token."""
    for sender in (hcm["access_log"][0], hcm["tracing"]["provider"]):
        try:
            service = sender["typed_config"]["http_service"]
        except KeyError:
            raise TemplateError(f"{sender.get('name')}: no http_service to send to the collector") from None
        service["http_uri"]["cluster"] = cluster
        if token is not None:
            header = {"header": {"key": "authorization", "value": f"Bearer {token}"}}
            service["request_headers_to_add"] = [header]


def demo_bootstrap(
    routes: dict[str, Any], access_log: dict[str, Any], layout: Layout, token: str | None = None
) -> dict[str, Any]:
    """deploy/envoy/bootstrap.yaml with access-log.yaml's logger, its periodic flush, sampling and
    request ids, for the demo; with `token`, its access log and spans carry it as a bearer token."""
    cfg = copy.deepcopy(routes)
    hcm, tap = _hcm(cfg, "bootstrap.yaml"), _hcm(access_log, "access-log.yaml")
    for key in ("access_log", "request_id_extension"):
        if key not in tap:
            raise TemplateError(f"access-log.yaml: its http_connection_manager has no {key}")
        hcm[key] = copy.deepcopy(tap[key])
    hcm["tracing"] = copy.deepcopy(tap.get("tracing") or hcm.get("tracing"))
    if "access_log_options" in tap:  # the periodic flush: the fast guard sees requests under way
        hcm["access_log_options"] = copy.deepcopy(tap["access_log_options"])
    send_to_collector(hcm, token)
    route_file = layout.envoy_route_file
    hcm["rds"] = {
        "route_config_name": ROUTE_CONFIG,
        "config_source": {
            "path_config_source": {
                "path": str(route_file),
                "watched_directory": {"path": str(route_file.parent)},
            }
        },
    }
    cfg["admin"] = {"address": _loopback(layout.envoy_admin_port)}  # no authentication: loopback only
    cfg["static_resources"]["listeners"][0]["address"] = _loopback(layout.envoy_port)
    clusters = []
    for cluster in cfg["static_resources"]["clusters"]:
        name = cluster["name"]
        if name in LANES:
            _endpoint(cluster)["port_value"] = layout.lane_port(name)
            cert = layout.cert(name)
            if cert is not None:  # the simulators serve HTTPS with the certificate they wrote
                cluster["transport_socket"] = {
                    "name": "envoy.transport_sockets.tls",
                    "typed_config": {
                        "@type": _TLS,
                        "common_tls_context": {"validation_context": {"trusted_ca": {"filename": str(cert)}}},
                    },
                }
            clusters.append(cluster)
        elif name == COLLECTOR_CLUSTER:
            _endpoint(cluster)["port_value"] = layout.collector_port
            clusters.append(cluster)
        else:
            raise TemplateError(f"bootstrap.yaml: cluster {name!r} has no demo counterpart")
    if {c["name"] for c in clusters} != {*LANES, COLLECTOR_CLUSTER}:
        raise TemplateError(f"bootstrap.yaml: expected clusters {sorted(LANES)} and the collector's")
    cfg["static_resources"]["clusters"] = clusters
    return cfg


def demo_route_template(shipped: dict[str, Any], fast_classes: Sequence[str]) -> dict[str, Any]:
    """The demo's route template: the shipped one's shed classes, routes by request class.

    Envoy cannot read the body's max_tokens, so the classes the gateway would send fast (the
    demo's traffic names its class in x-lanewatch-class) go to the fast lane, the rest to the
    slow lane, whose route a shift splits. Both lanes serve one model name: a shifted request is
    sent unchanged. Every response names the cluster that served it (x-lanewatch-lane).
    """
    header = {"append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
    routes: list[dict[str, Any]] = [
        {
            "name": f"fast-{cls}",
            "match": {"prefix": "/", "headers": [{"name": CLASS_HEADER, "string_match": {"exact": cls}}]},
            "metadata": {"filter_metadata": {"lanewatch": {"lane": "fast"}}},
            "route": {"cluster": "fast", "timeout": "0s"},
        }
        for cls in fast_classes
    ]
    routes.append(
        {
            "name": "slow",
            "match": {"prefix": "/"},
            "metadata": {"filter_metadata": {"lanewatch": {"lane": "slow"}}},
            "route": {"cluster": "slow", "timeout": "0s"},
        }
    )
    return {
        "classes": copy.deepcopy(shipped.get("classes") or {}),
        "retry_after_s": shipped.get("retry_after_s", 30),
        "route_config": {
            "name": ROUTE_CONFIG,
            "request_headers_to_add": [{"header": {"key": MODEL_HEADER, "value": MODEL}, **header}],
            "response_headers_to_add": [
                {"header": {"key": LANE_HEADER, "value": "%UPSTREAM_CLUSTER%"}, **header}
            ],
            "virtual_hosts": [{"name": "llm", "domains": ["*"], "routes": routes}],
        },
    }


async def held_state(layout: Layout) -> dict[str, Any]:
    """The degrade state Envoy holds, read back from its /config_dump, as the gateway's state reads."""
    settings = EnvoySettings.model_validate(envoy_adapter_entry(layout))
    adapter = EnvoyAdapter(settings)
    try:
        view = await adapter.read_back()
    except AdapterError as exc:
        raise ValueError(str(exc)) from None
    finally:
        await adapter.shutdown()
    return {"lanes": {lane: dataclasses.asdict(d) for lane, d in view.lanes.items()}, "version": None}


def write_envoy_configs(
    layout: Layout, fast_classes: Sequence[str], deploy_dir: Path = DEPLOY_DIR, token: str | None = None
) -> None:
    """Write Envoy's bootstrap (with `token`, the collector's ingest token: mode 0600), the route
    template and its first rendering (Envoy reads it at start)."""
    folder = deploy_dir / "envoy"
    bootstrap = demo_bootstrap(
        read_template(folder / "bootstrap.yaml"), read_template(folder / "access-log.yaml"), layout, token
    )
    template = demo_route_template(read_template(folder / "routes.template.yaml"), fast_classes)
    layout.envoy_route_file.parent.mkdir(parents=True, exist_ok=True)
    write_private(layout.envoy_yaml, yaml.safe_dump(bootstrap, sort_keys=False))
    text = yaml.safe_dump(template, sort_keys=False)
    layout.envoy_route_template.write_text(text, encoding="utf-8")
    write_atomic(layout.envoy_route_file, render_text(render(parse_template(text), {})))
