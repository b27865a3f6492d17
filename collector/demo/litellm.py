"""The demo's LiteLLM proxy: lanewatch's handler loaded from its config, one model group per lane.

The proxy runs from the venv `make litellm` builds (`litellm[proxy]` pinned: LITELLM_VERSION,
under the cache `make vllm` uses), or from this interpreter's environment when `litellm` is
installed beside it. That venv holds no lanewatch: the handler's code reaches it as the wheel's
import layout (lanewatch/collector, lanewatch/integrations) through a folder of links on
PYTHONPATH, made from where this interpreter imports them. No database, no master key (it
listens on 127.0.0.1 only), no telemetry, the model cost map read from the package.

Each lane is a model group named after the model its simulator serves, its deployment id the
lane's name (LiteLLM answers with it in `x-litellm-model-id`). The simulators serve HTTPS with
the certificates they write at start: LiteLLM trusts the two through one bundle (`SSL_VERIFY`).
Pure functions, but `link_tree`, `write_cert_bundle` and `write_litellm_configs`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from lanewatch.collector.common.headers import CLASS_HEADER

from .configs import LANES, Layout
from .engines import vllm_cache

__all__ = [
    "HANDLER_NEEDS",
    "LANE_HEADER",
    "LITELLM_VERSION",
    "LitellmInstall",
    "default_litellm_root",
    "find_litellm",
    "handler_settings",
    "link_tree",
    "litellm_env",
    "proxy_command",
    "proxy_config",
    "write_cert_bundle",
    "write_litellm_configs",
]

LITELLM_VERSION: Final = "1.106.12"  # the newest whose [proxy] extra resolves from the registry here
HANDLER: Final = "lanewatch.integrations.litellm.handler"  # what the proxy config names
# The parts of lanewatch the handler imports inside LiteLLM's venv.
IN_PROXY: Final = ("lanewatch.collector", "lanewatch.integrations")
# What the handler imports beyond the standard library and LiteLLM's own dependencies: the record
# codec's encoder (collector/record/codec.py), which every record sender ships with.
HANDLER_NEEDS: Final = ("msgspec>=0.19",)
# LiteLLM names the deployment that served a request in this response header: the demo's
# deployment ids are the lanes' names, so it names the lane.
LANE_HEADER: Final = "x-litellm-model-id"


@dataclass(frozen=True)
class LitellmInstall:
    """A venv holding `litellm[proxy]`: bin/python and bin/litellm."""

    root: Path

    @property
    def python(self) -> Path:
        """The venv's interpreter (its scripts' shebangs may name the folder it was built in)."""
        return self.root / "bin" / "python"

    @property
    def command(self) -> Path:
        """The `litellm` script, run through `python`."""
        return self.root / "bin" / "litellm"


def default_litellm_root(env: Mapping[str, str] | None = None) -> Path:
    """Where `make litellm` puts the pinned proxy: <cache>/litellm-<version>."""
    return vllm_cache(env) / f"litellm-{LITELLM_VERSION}"


def find_litellm(env: Mapping[str, str] | None = None) -> LitellmInstall | None:
    """The LiteLLM proxy beside this Python, else `make litellm`'s venv; None when neither has it."""
    here = LitellmInstall(Path(sys.executable).parent.parent)
    for install in (here, LitellmInstall(default_litellm_root(env))):
        if install.command.is_file() and install.python.exists():
            return install
    return None


def litellm_env(base: Mapping[str, str]) -> dict[str, str]:
    """The proxy's environment from `base`: offline (the packaged cost map), no telemetry, no database."""
    env = {k: v for k, v in base.items() if k not in ("DATABASE_URL", "LITELLM_MASTER_KEY")}
    env |= {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
        "LITELLM_LOG": "ERROR",
        "NO_DOCS": "True",
    }
    return env


def _package_folder(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise RuntimeError(f"{name} is not importable here: lanewatch's install is incomplete")
    return Path(locations[0])


def link_tree(folder: Path) -> Path:
    """Links lanewatch/collector and lanewatch/integrations to this install's folders, in `folder`:
    the path to put on the proxy's PYTHONPATH."""
    for name in IN_PROXY:
        link = folder.joinpath(*name.split("."))
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(_package_folder(name), target_is_directory=True)
    return folder


def proxy_config(layout: Layout, models: Mapping[str, str]) -> dict[str, Any]:
    """The proxy's config: a model group per lane (`models[lane]`, served by the lane's simulator),
    deployment id the lane; lanewatch's handler the one callback."""
    return {
        "model_list": [
            {
                "model_name": models[lane],
                "model_info": {"id": lane},
                "litellm_params": {
                    "model": f"openai/{models[lane]}",
                    "api_base": f"{layout.lane_url(lane)}/v1",
                    "api_key": "none",
                },
            }
            for lane in LANES
        ],
        "litellm_settings": {
            "telemetry": False,
            "callbacks": [HANDLER],
            "drop_params": True,
            "request_timeout": 300,
        },
        "general_settings": {"disable_spend_logs": True, "dangerously_permit_weak_or_unset_master_key": True},
    }


def handler_settings(layout: Layout, models: Mapping[str, str]) -> dict[str, Any]:
    """The handler's settings: records to the collector, each model group its lane, the degrade
    endpoint the controller's litellm adapter drives. The demo's traffic is the operator's own and
    names its class, as the gateway trusts it (`gateway.hints`)."""
    return {
        "collector_url": layout.collector_url,
        "token_file": str(layout.token_file("ingest")),  # the collector's ingest token
        "lanes": {models[lane]: lane for lane in LANES},
        "lane_order": list(LANES),
        "interval_s": 0.5,
        "admin_port": layout.litellm_admin_port,
        "admin_token_file": str(layout.token_file("litellm-admin")),
        "class_header": CLASS_HEADER,
        "trust_class_header": True,
    }


def write_cert_bundle(layout: Layout) -> Path:
    """The simulators' certificates in one file, for LiteLLM to trust (once both lanes serve)."""
    certs = [cert.read_text(encoding="utf-8") for lane in LANES if (cert := layout.cert(lane)) is not None]
    layout.litellm_cert_bundle.write_text("".join(certs), encoding="utf-8")
    return layout.litellm_cert_bundle


def write_litellm_configs(layout: Layout, models: Mapping[str, str]) -> None:
    """Write the proxy's config and the handler's settings into the run's workdir."""
    folder = layout.litellm_yaml.parent
    folder.mkdir(parents=True, exist_ok=True)
    layout.litellm_yaml.write_text(
        yaml.safe_dump(proxy_config(layout, models), sort_keys=False), encoding="utf-8"
    )
    layout.litellm_settings.write_text(
        json.dumps(handler_settings(layout, models), indent=1), encoding="utf-8"
    )


def proxy_command(layout: Layout, install: LitellmInstall) -> tuple[list[str], dict[str, str | None]]:
    """The proxy's command line (one worker: the degrade state is one process's) and the environment
    it adds: the handler's code and settings, the simulators' certificates, offline."""
    argv = [
        str(install.python), str(install.command), "--config", str(layout.litellm_yaml),
        "--host", "127.0.0.1", "--port", str(layout.litellm_port), "--num_workers", "1",
    ]  # fmt: skip
    env: dict[str, str | None] = {
        **litellm_env({}),
        "DATABASE_URL": None,  # unset in the demo's environment: no database, no master key
        "LITELLM_MASTER_KEY": None,
        "PYTHONPATH": str(layout.workdir / "litellm" / "lanewatch-path"),
        "LANEWATCH_LITELLM_CONFIG": str(layout.litellm_settings),
        "SSL_VERIFY": str(layout.litellm_cert_bundle),
    }
    return argv, env
