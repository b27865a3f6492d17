"""Real Envoy and nginx on 127.0.0.1, run from the shipped configs (deploy/envoy, deploy/nginx).

The shipped files are loaded and only their ports and paths are changed, so the tests run the
configs users copy. Each router runs in its own process group in a temp folder and is
stopped when the block ends; a missing binary skips loudly (fails under CI=true).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lanewatch.collector.degrade.adapters import EnvoySettings, NginxSettings
from lanewatch.collector.degrade.adapters.envoy_render import parse_template, render, render_text
from lanewatch.collector.degrade.adapters.nginx import render_include
from tests.conftest import require_binary
from tests.layout import ROOT
from tests.servers import free_port, started, wait_http

ENVOY_DIR = ROOT / "deploy" / "envoy"
NGINX_DIR = ROOT / "deploy" / "nginx"


def require_router(name: str) -> str:
    """The router's binary (beside this Python, on PATH, or in sbin); a loud skip without it."""
    return require_binary(name)


@dataclass(frozen=True)
class Router:
    """A running router: where clients send, the adapter settings that drive it, its process."""

    url: str
    settings: EnvoySettings | NginxSettings
    process: subprocess.Popen[bytes]
    log: Path


def envoy_bootstrap(
    folder: Path, ports: dict[str, int], listen: int, admin: int, *, lua: bool = True
) -> dict[str, Any]:
    """The shipped bootstrap with its ports, lanes and route file moved under `folder`; with
    `lua=False`, without its Lua filter (a bootstrap written before the model rewrite)."""
    boot: dict[str, Any] = yaml.safe_load((ENVOY_DIR / "bootstrap.yaml").read_text())
    boot["admin"]["address"]["socket_address"]["port_value"] = admin
    listener = boot["static_resources"]["listeners"][0]
    listener["address"]["socket_address"].update(address="127.0.0.1", port_value=listen)
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    source = hcm["rds"]["config_source"]["path_config_source"]
    source.update(path=str(folder / "routes.yaml"), watched_directory={"path": str(folder)})
    if not lua:
        hcm["http_filters"] = [f for f in hcm["http_filters"] if f["name"] != "envoy.filters.http.lua"]
    for cluster in boot["static_resources"]["clusters"]:
        if cluster["name"] in ports:
            lb = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
            lb["endpoint"]["address"]["socket_address"]["port_value"] = ports[cluster["name"]]
    return boot


@contextmanager
def running_envoy(
    tmp_path: Path, ports: dict[str, int], *, without_lua: bool = False, **settings: Any
) -> Iterator[Router]:
    """Envoy from the shipped bootstrap and route template, its routes in a watched folder."""
    binary = require_router("envoy")
    routes = tmp_path / "envoy-routes"
    routes.mkdir()
    template = tmp_path / "routes.template.yaml"
    template.write_text((ENVOY_DIR / "routes.template.yaml").read_text())
    (routes / "routes.yaml").write_text(render_text(render(parse_template(template.read_text()), {})))
    listen, admin = free_port(), free_port()
    boot = tmp_path / "bootstrap.yaml"
    boot.write_text(yaml.safe_dump(envoy_bootstrap(routes, ports, listen, admin, lua=not without_lua)))
    log = tmp_path / "envoy.log"
    argv = [binary, "-c", str(boot), "--disable-hot-restart", "--concurrency", "1", "--log-level", "warn"]
    with started(argv, log) as proc:
        wait_http(f"http://127.0.0.1:{admin}/ready", proc, lambda: log.read_text(errors="replace"))
        cfg = EnvoySettings(
            route_template=template,
            route_file=routes / "routes.yaml",
            admin_url=f"http://127.0.0.1:{admin}",
            envoy_binary=binary,
            **settings,
        )
        yield Router(f"http://127.0.0.1:{listen}", cfg, proc, log)


def nginx_conf(prefix: Path, ports: dict[str, int], listen: int) -> str:
    """The shipped nginx.conf with its ports and include under `prefix`."""
    text = (NGINX_DIR / "nginx.conf").read_text()
    text = text.replace("/etc/nginx/lanewatch/lanes.conf", str(prefix / "lanes.conf"))
    text = text.replace("127.0.0.1:10080", f"127.0.0.1:{listen}")
    shipped = {"fast": 8001, "slow": 8002}
    for lane, port in ports.items():
        text = text.replace(f"server 127.0.0.1:{shipped[lane]};", f"server 127.0.0.1:{port};")
    return text


@contextmanager
def running_nginx(tmp_path: Path, ports: dict[str, int], **settings: Any) -> Iterator[Router]:
    """nginx, unprivileged, from the shipped config in a temp prefix; the adapter's commands to match."""
    binary = require_router("nginx")
    prefix = tmp_path / "nginx"
    prefix.mkdir()
    listen = free_port()
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, ports, listen))
    (prefix / "lanes.conf").write_text(render_include({}, ["fast", "slow"], 30))
    base = [binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")]
    globals_ = ["-g", f"pid {prefix / 'nginx.pid'}; daemon off;"]
    log = prefix / "stderr.log"
    with started([*base, *globals_], log) as proc:
        wait_http(
            f"http://127.0.0.1:{listen}/health",
            proc,
            lambda: (prefix / "error.log").read_text(errors="replace"),
        )
        cfg = NginxSettings(
            include_file=prefix / "lanes.conf",
            check_command=[*base, *globals_, "-t", "-q"],
            reload_command=[*base, *globals_, "-s", "reload"],
            pid_file=prefix / "nginx.pid",
            **settings,
        )
        yield Router(f"http://127.0.0.1:{listen}", cfg, proc, prefix / "error.log")
