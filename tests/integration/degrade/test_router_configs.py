"""The router configs in deploy/ are valid for the real routers, as shipped (paths moved to a temp dir)."""

from __future__ import annotations

import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from lanewatch.collector.degrade.adapters.envoy_render import (
    parse_template,
    render,
    render_text,
    validation_bootstrap,
)
from lanewatch.collector.degrade.adapters.nginx import render_include
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.servers import free_port, lanewatch_command, started, wait_http

from .routers import ENVOY_DIR, NGINX_DIR, require_router

pytestmark = pytest.mark.integration


def test_the_shipped_envoy_bootstrap_validates(tmp_path: Path) -> None:
    envoy = require_router("envoy")
    boot = yaml.safe_load((ENVOY_DIR / "bootstrap.yaml").read_text())
    assert boot["node"] == {"id": "lanewatch-edge", "cluster": "lanewatch-edge"}
    assert boot["admin"]["address"]["socket_address"]["address"] == "127.0.0.1"
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["tracing"]["provider"]["name"] == "envoy.tracers.opentelemetry"
    template = parse_template((ENVOY_DIR / "routes.template.yaml").read_text())
    assert hcm["rds"]["route_config_name"] == template.name
    clusters = {c["name"] for c in boot["static_resources"]["clusters"]}
    assert set(template.clusters.values()) <= clusters
    source = hcm["rds"]["config_source"]["path_config_source"]
    source.update(path=str(tmp_path / "routes.yaml"), watched_directory={"path": str(tmp_path)})
    (tmp_path / "routes.yaml").write_text(render_text(render(template, {})))
    (tmp_path / "bootstrap.yaml").write_text(yaml.safe_dump(boot))
    argv = [envoy, "--mode", "validate", "-c", str(tmp_path / "bootstrap.yaml"), "--log-level", "error"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "rule",
    [
        {"prefix": "/slow/v1/completions"},
        {"path": "/slow/v1/completions"},
        {"path_separated_prefix": "/slow/v1"},
        {"safe_regex": {"regex": "(/slow)?/v1/completions"}},
    ],
)
def test_a_shed_on_a_lane_chosen_by_path_renders_routes_envoy_validates(
    rule: dict[str, object], tmp_path: Path
) -> None:
    envoy = require_router("envoy")
    data = yaml.safe_load((ENVOY_DIR / "routes.template.yaml").read_text())
    data["route_config"]["virtual_hosts"][0]["routes"][0]["match"]["prefix"] = "/slow/"  # the slow lane's
    data["classes"]["batch"] = {**data["classes"]["batch"], **rule}
    routes = render(parse_template(yaml.safe_dump(data)), {"slow": LaneDegrade(shed_classes=("batch",))})
    shed = routes["virtual_hosts"][0]["routes"][0]
    assert shed["match"]["prefix"] == "/slow/" and shed["match"]["headers"][1]["name"] == ":path"
    (tmp_path / "validate.yaml").write_text(yaml.safe_dump(validation_bootstrap(routes)))
    argv = [envoy, "--mode", "validate", "-c", str(tmp_path / "validate.yaml"), "--log-level", "error"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_shipped_nginx_config_passes_nginx_t(tmp_path: Path) -> None:
    nginx = require_router("nginx")
    text = (NGINX_DIR / "nginx.conf").read_text()
    assert "include /etc/nginx/lanewatch/lanes.conf;" in text
    (tmp_path / "nginx.conf").write_text(
        text.replace("/etc/nginx/lanewatch/lanes.conf", str(tmp_path / "lanes.conf"))
    )
    (tmp_path / "lanes.conf").write_text(render_include({}, ["fast", "slow"], 30))
    argv = [nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")]
    argv += ["-g", f"pid {tmp_path / 'nginx.pid'};", "-t"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("lanes", [["default", "include"], ["hostnames", "volatile"]])
def test_lanes_named_as_map_keywords_render_an_include_nginx_runs(tmp_path: Path, lanes: list[str]) -> None:
    nginx = require_router("nginx")
    first, second = lanes
    state = {
        second: LaneDegrade(shift_to=first, shift_percent=100),
        first: LaneDegrade(shed_classes=("batch",)),
    }
    (tmp_path / "lanes.conf").write_text(render_include(state, lanes, 30))
    listen = free_port()
    upstreams = "".join(f"upstream {lane} {{ server 127.0.0.1:9; }}\n" for lane in lanes)
    (tmp_path / "nginx.conf").write_text(
        "events {}\nhttp {\n" + upstreams + "map $http_x_lane $lanewatch_lane { default $http_x_lane; }\n"
        "map $http_x_class $lanewatch_class { default $http_x_class; }\n"
        f"include {tmp_path / 'lanes.conf'};\n"
        f"server {{ listen 127.0.0.1:{listen};\n"
        'location / { return 200 "$lanewatch_routed $lanewatch_upstream $lanewatch_shed"; } } }\n'
    )
    argv = [nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")]
    argv += ["-g", f"pid {tmp_path / 'nginx.pid'}; daemon off;"]
    with started(argv, tmp_path / "stderr.log") as proc:
        wait_http(f"http://127.0.0.1:{listen}/", proc, lambda: (tmp_path / "error.log").read_text())

        def ask(lane: str, cls: str) -> str:
            req = urllib.request.Request(
                f"http://127.0.0.1:{listen}/", headers={"x-lane": lane, "x-class": cls}
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                return str(r.read().decode())

        assert ask(first, "chat") == f"{first} {first} 0"
        assert ask(first, "batch") == f"{first} {first} 1"
        assert ask(second, "chat") == f"{second} {first} 0"  # shifted
        assert ask(second, "batch") == f"{second} {first} 1"  # shifted to a lane that sheds batch


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_the_envoy_bootstraps_header_steps_write_the_route_file_and_then_validate(tmp_path: Path) -> None:
    envoy = require_router("envoy")
    text = (ENVOY_DIR / "bootstrap.yaml").read_text()
    steps = [line.removeprefix("#   ").split("  (")[0].split() for line in text.splitlines()[:8]]
    write = next(s for s in steps if s[:3] == ["lanewatch", "degrade", "envoy-routes"])
    check = next(s for s in steps if s[:3] == ["envoy", "--mode", "validate"])
    routes = write[write.index("--out") + 1]
    hcm = yaml.safe_load(text)["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
    assert routes == hcm["typed_config"]["rds"]["config_source"]["path_config_source"]["path"]
    # the shipped folder as the header's commands see it, the route file's folder moved to a temp dir
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "bootstrap.yaml").write_text(text.replace(str(Path(routes).parent), str(tmp_path / "lib")))
    (folder / "routes.template.yaml").write_text((ENVOY_DIR / "routes.template.yaml").read_text())
    validate = [envoy, *check[1:], "--log-level", "error", "--use-dynamic-base-id"]
    before = _run(validate, folder)
    assert before.returncode != 0 and "routes.yaml" in before.stdout + before.stderr  # what the step fixes
    moved = [str(tmp_path / "lib" / "routes.yaml") if a == routes else a for a in write[1:]]
    wrote = _run([*lanewatch_command(), *moved], folder)
    assert wrote.returncode == 0, wrote.stderr
    after = _run(validate, folder)
    assert after.returncode == 0, after.stdout + after.stderr
    again = _run([*lanewatch_command(), *moved], folder)
    assert again.returncode == 2 and "--force" in again.stderr  # a route file that is there is left alone
