"""The LiteLLM proxy as a peer gateway: in a venv of its own under the bench's cache, configured offline.

`litellm[proxy]` (pinned: LITELLM_VERSION, from collector/demo/litellm.py, where `lanewatch demo
--router litellm` looks for the same venv) is installed on first use (or by `make litellm`) with
pip from the registry into ${LANEWATCH_CACHE:-~/.cache/lanewatch}/litellm-<version> (built as
`.partial`, renamed when pip succeeds, so a failed install is retried next time rather than half
used). Its configuration is one model, `bench`, served as an OpenAI-compatible `openai/` model
whose `api_base` is the bench's upstream; no database, no master key (allowed explicitly: it
listens on 127.0.0.1 only), no callbacks, no telemetry, and the model cost map read from the
package rather than fetched (`litellm_env`). One worker process, as the gateway runs one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from lanewatch.collector.demo.litellm import HANDLER, HANDLER_NEEDS, LITELLM_VERSION, link_tree, litellm_env
from lanewatch.integrations.litellm.settings import CONFIG_ENV
from tests.servers import free_port, started, wait_http

from .machine import ProxyProcess

__all__ = [
    "LITELLM_VERSION",
    "ensure_litellm",
    "handler_settings",
    "litellm_config",
    "litellm_env",
    "start_litellm",
]

# the cache every checkout shares, as `make vllm` uses it
CACHE = Path(os.environ.get("LANEWATCH_CACHE") or Path.home() / ".cache" / "lanewatch")
_INSTALL_TIMEOUT_S = 900


def litellm_config(upstream_url: str) -> dict[str, Any]:
    """The proxy's config: model `bench` → the upstream's OpenAI-compatible /v1, nothing else on."""
    return {
        "model_list": [
            {
                "model_name": "bench",
                "litellm_params": {
                    "model": "openai/bench",
                    "api_base": f"{upstream_url}/v1",
                    "api_key": "none",
                },
            }
        ],
        "litellm_settings": {
            "telemetry": False,
            "callbacks": [],
            "success_callback": [],
            "failure_callback": [],
            "drop_params": True,
            "request_timeout": 300,
        },
        # no key: the bench's client sends none, on loopback only (a master key's check is cheap)
        "general_settings": {"disable_spend_logs": True, "dangerously_permit_weak_or_unset_master_key": True},
    }


def venv_dir(version: str = LITELLM_VERSION) -> Path:
    """Where the pinned version's venv lives."""
    return CACHE / f"litellm-{version}"


def ensure_litellm(version: str = LITELLM_VERSION) -> Path:
    """The `litellm` command of the pinned version with what lanewatch's handler needs beside it
    (HANDLER_NEEDS), installing them first when absent; RuntimeError (with pip's last words) when
    the install fails."""
    done = venv_dir(version)
    command = done / "bin" / "litellm"
    if command.is_file():
        if not _has_handler_needs(done):  # a venv made before the handler needed them
            _pip(done, [str(done / "bin" / "python"), "-m", "pip", "install", "-q", *HANDLER_NEEDS])
        return command
    partial = done.with_name(done.name + ".partial")
    CACHE.mkdir(parents=True, exist_ok=True)
    _pip(done, [sys.executable, "-m", "venv", "--clear", str(partial)])
    install = [f"litellm[proxy]=={version}", *HANDLER_NEEDS]
    _pip(done, [str(partial / "bin" / "python"), "-m", "pip", "install", "-q", *install])
    partial.rename(done)  # venv scripts keep the .partial path in their shebang: call them through python
    return command


def _has_handler_needs(venv: Path) -> bool:
    names = [need.split(">", 1)[0].split("=", 1)[0] for need in HANDLER_NEEDS]
    probe = [str(venv / "bin" / "python"), "-c", f"import {', '.join(names)}"]
    return subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0


def _pip(venv: Path, step: list[str]) -> None:
    what = f"installing {' '.join(step[step.index('-q') + 1 :]) if '-q' in step else venv.name}"
    try:
        r = subprocess.run(step, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{what}: timed out after {e.timeout:.0f} s") from e
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"{what} failed: {' '.join(tail)[:300]}")


def handler_settings(sink_url: str, admin_port: int, admin_token_file: Path) -> dict[str, Any]:
    """lanewatch's handler as deployed: records of model `bench` (lane `bench`) shipped to `sink_url`,
    the degrade endpoint on `admin_port` (no degrade state set: the pre-call hook reads each
    request's class and finds nothing to do)."""
    return {
        "collector_url": sink_url,
        "lanes": {"bench": "bench"},
        "admin_port": admin_port,
        "admin_token_file": str(admin_token_file),
    }


@contextmanager
def start_litellm(
    command: Path, folder: Path, upstream_url: str, handler: Mapping[str, Any] | None = None
) -> Iterator[ProxyProcess]:
    """Run the proxy in front of `upstream_url` until the block exits; with `handler` (its settings),
    lanewatch's handler loaded from the proxy's config, its code on PYTHONPATH as the wheel lays it out."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "litellm.yaml"
    cfg = litellm_config(upstream_url)
    env = litellm_env(dict(os.environ))
    if handler is not None:
        cfg["litellm_settings"]["callbacks"] = [HANDLER]
        settings = folder / "lanewatch-litellm.json"
        settings.write_text(json.dumps(dict(handler)))
        env |= {"PYTHONPATH": str(link_tree(folder / "lanewatch-path")), CONFIG_ENV: str(settings)}
    config.write_text(yaml.safe_dump(cfg))
    port = free_port()
    python = command.parent / "python"
    args = [str(python), str(command), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--num_workers", "1", "--keepalive_timeout", "600"]  # uvicorn's 5 s would close the
    # bench's kept-alive connections while the other paths take their turn
    log = folder / "litellm.log"
    with started(args, log, env=env, cwd=folder) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health/liveliness", proc, lambda: log.read_text(errors="replace"), timeout_s=120)
        yield ProxyProcess(url, proc)
