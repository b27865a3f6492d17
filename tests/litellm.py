"""A real LiteLLM proxy for tests, with lanewatch's handler loaded: the venv `make litellm` builds.

The proxy runs in its own venv (bench/litellm_proxy.py's pinned `litellm[proxy]`), which holds no
lanewatch: the handler's code reaches it as the wheel's import layout would, through a tree of
links (lanewatch/collector -> collector/, lanewatch/integrations -> integrations/) on PYTHONPATH,
made from pyproject's package-dir table. Without the venv the test skips loudly (fails under
CI=true).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.litellm_proxy import litellm_config, litellm_env, venv_dir
from tests.layout import ROOT, package_dirs
from tests.missing import missing
from tests.servers import free_port, started, wait_http

HANDLER = "lanewatch.integrations.litellm.handler"  # what a proxy config names
# the parts of lanewatch the handler may import inside LiteLLM's venv
IN_PROXY = ("lanewatch.collector", "lanewatch.integrations")


@dataclass(frozen=True)
class Proxy:
    """A running LiteLLM proxy."""

    url: str
    log_path: Path


def litellm_python() -> Path:
    """The LiteLLM venv's python; a loud skip (a failure under CI=true) when `make litellm` has not run."""
    python = venv_dir() / "bin" / "python"
    if not python.is_file():
        missing(f"no LiteLLM venv at {venv_dir()} (run `make litellm`)")
    return python


def link_tree(folder: Path) -> Path:
    """The import layout of the parts the handler uses, as links: the folder to put on PYTHONPATH."""
    for name, source in package_dirs().items():
        if name in IN_PROXY:
            link = folder.joinpath(*name.split("."))
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(ROOT / source)
    return folder


def proxy_config(
    groups: Mapping[str, tuple[str, str]], handler: bool = True, forward_headers: bool = False
) -> dict[str, Any]:
    """The bench's offline config with one model group per entry (name -> the upstream's URL and the
    model it serves), deployment id `<name>-deployment`, the handler on; `forward_headers`: the
    client's `x-*` headers go on to the upstream (LiteLLM's forward_client_headers_to_llm_api)."""
    cfg = litellm_config("http://unused")
    cfg["model_list"] = [
        {
            "model_name": name,
            "model_info": {"id": f"{name}-deployment"},
            "litellm_params": {"model": f"openai/{model}", "api_base": f"{url}/v1", "api_key": "none"},
        }
        for name, (url, model) in groups.items()
    ]
    if handler:
        cfg["litellm_settings"]["callbacks"] = [HANDLER]
    if forward_headers:
        cfg["general_settings"]["forward_client_headers_to_llm_api"] = True
    return dict(cfg)


@contextmanager
def start_proxy(
    folder: Path,
    groups: Mapping[str, tuple[str, str]],
    settings: Mapping[str, Any],
    forward_headers: bool = False,
) -> Iterator[Proxy]:
    """Run the proxy in front of `groups` (see proxy_config) with the handler's `settings` until the
    block exits."""
    python = litellm_python()
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "litellm.yaml"
    config.write_text(yaml.safe_dump(proxy_config(groups, forward_headers=forward_headers)))
    handler_json = folder / "lanewatch-litellm.json"
    handler_json.write_text(json.dumps(dict(settings)))
    env = litellm_env(dict(os.environ))
    env |= {
        "PYTHONPATH": str(link_tree(folder / "lanewatch-path")),
        "LANEWATCH_LITELLM_CONFIG": str(handler_json),
    }
    port = free_port()
    command = venv_dir() / "bin" / "litellm"
    args = [str(python), str(command), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--num_workers", "1"]
    log = folder / "litellm.log"
    with started(args, log, env=env, cwd=folder) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health/liveliness", proc, lambda: log.read_text(errors="replace"), timeout_s=120)
        yield Proxy(url, log)
