"""The LiteLLM proxy as a peer gateway: in a venv of its own under the bench's cache, configured offline.

`litellm[proxy]` (pinned: LITELLM_VERSION) is installed on first use (or by `make litellm`) with
pip from the registry into ${LANEWATCH_CACHE:-~/.cache/lanewatch}/litellm-<version> (built as
`.partial`, renamed when pip succeeds, so a failed install is retried next time rather than half
used). Its
configuration is one model, `bench`, served as an OpenAI-compatible `openai/` model whose
`api_base` is the bench's upstream; no database, no master key (allowed explicitly: it listens
on 127.0.0.1 only), no callbacks, no telemetry,
and the model cost map read from the package rather than fetched. One worker process, as
the gateway runs one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.servers import free_port, started, wait_http

from .machine import ProxyProcess

__all__ = [
    "LITELLM_VERSION",
    "ensure_litellm",
    "litellm_config",
    "litellm_env",
    "start_litellm",
]

LITELLM_VERSION = "1.106.12"  # the newest whose [proxy] extra resolves from the registry here
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


def litellm_env(base: dict[str, str]) -> dict[str, str]:
    """The environment: offline (the packaged cost map), no telemetry, no database."""
    env = {k: v for k, v in base.items() if k not in ("DATABASE_URL", "LITELLM_MASTER_KEY")}
    env |= {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_LOG": "ERROR",
        "NO_DOCS": "True",
    }
    return env


def venv_dir(version: str = LITELLM_VERSION) -> Path:
    """Where the pinned version's venv lives."""
    return CACHE / f"litellm-{version}"


def ensure_litellm(version: str = LITELLM_VERSION) -> Path:
    """The `litellm` command of the pinned version, installing it first when absent; RuntimeError
    (with pip's last words) when the install fails."""
    done = venv_dir(version)
    command = done / "bin" / "litellm"
    if command.is_file():
        return command
    partial = done.with_name(done.name + ".partial")
    CACHE.mkdir(parents=True, exist_ok=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", str(partial)],
        [str(partial / "bin" / "python"), "-m", "pip", "install", "-q", f"litellm[proxy]=={version}"],
    ]
    for step in steps:
        try:
            r = subprocess.run(step, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(
                f"installing litellm[proxy]=={version}: timed out after {e.timeout:.0f} s"
            ) from e
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
            raise RuntimeError(f"installing litellm[proxy]=={version} failed: {' '.join(tail)[:300]}")
    partial.rename(done)  # venv scripts keep the .partial path in their shebang: call them through python
    return command


@contextmanager
def start_litellm(command: Path, folder: Path, upstream_url: str) -> Iterator[ProxyProcess]:
    """Run the proxy in front of `upstream_url` until the block exits."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "litellm.yaml"
    config.write_text(yaml.safe_dump(litellm_config(upstream_url)))
    port = free_port()
    python = command.parent / "python"
    args = [str(python), str(command), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    args += ["--num_workers", "1", "--keepalive_timeout", "600"]  # uvicorn's 5 s would close the
    # bench's kept-alive connections while the other paths take their turn
    log = folder / "litellm.log"
    with started(args, log, env=litellm_env(dict(os.environ)), cwd=folder) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_http(f"{url}/health/liveliness", proc, lambda: log.read_text(errors="replace"), timeout_s=120)
        yield ProxyProcess(url, proc)
