"""The demo's configuration: every part on 127.0.0.1, rendered from deploy/ with short intervals.

Pure functions from (template, layout) to config dicts; `write_configs` is the thin I/O edge.
Prometheus and Alertmanager start from deploy/prometheus/prometheus.yml and
deploy/alertmanager/alertmanager.yml, so the demo runs what a user would deploy, with
loopback ports, 1 s scrape and rule evaluation, and the demo's time-compressed rules
(alerts/generated/lanewatch-demo-rules.yml, from alerts/slos-demo.yaml).
"""

from __future__ import annotations

import copy
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from lanewatch.alerts.build import GENERATED_DIR
from lanewatch.alerts.spec import DEFAULT_SPEC, DEMO_SPEC, DEMO_VLLM_SPEC
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.common.input_files import data_path
from lanewatch.collector.probe.settings import DEFAULT_CLASSES, RequestClass

__all__ = [
    "DEMO_RULES",
    "DEMO_VLLM_RULES",
    "DEMO_VLLM_SPEC",
    "DEPLOY_DIR",
    "PRODUCTION_RULES",
    "Layout",
    "TemplateError",
    "alertmanager_config",
    "envoy_adapter_entry",
    "lanewatch_config",
    "litellm_adapter_entry",
    "policy_config",
    "prometheus_config",
    "write_configs",
    "write_secrets",
]

# deploy/, shipped as the data package lanewatch.deploy (the checkout's folder in an editable install).
DEPLOY_DIR: Final = data_path("lanewatch.deploy")
DEMO_RULES: Final = GENERATED_DIR / "lanewatch-demo-rules.yml"
PRODUCTION_RULES: Final = GENERATED_DIR / "lanewatch-rules.yml"
# The real-engine demo's rules, from alerts/slos-demo-vllm.yaml (DEMO_VLLM_SPEC).
DEMO_VLLM_RULES: Final = GENERATED_DIR / "lanewatch-demo-vllm-rules.yml"
LANES: Final = ("fast", "slow")  # fastest first
# Each lane's simulator serves its own model name, as a small and a big model would: a request
# served by the other lane (a degrade shift, the short-answer rule) is rewritten by the gateway.
MODELS: Final = {"fast": "lanewatch-demo-small", "slow": "lanewatch-demo-big"}
MODEL: Final = MODELS["slow"]  # what the demo's traffic asks for; the gateway picks the tier
DEGRADE_RECEIVER: Final = "lanewatch-degrade"
GATEWAY_JOB: Final = "lanewatch-gateway"


class TemplateError(ConfigError, ValueError):
    """A deploy/ template the demo cannot fill in; the message names the file and what is missing."""


@dataclass(frozen=True)
class Layout:
    """Where every part listens and keeps its files, for one demo run."""

    workdir: Path
    fast_port: int
    slow_port: int
    collector_port: int
    gateway_port: int
    degrade_port: int
    prometheus_port: int
    alertmanager_port: int
    seed: int = 0
    vllm_lanes: frozenset[str] = frozenset()  # lanes served by a real `vllm serve`, not the simulator
    router: str = "gateway"  # what the traffic goes through: `gateway`, `envoy` or `litellm`
    envoy_port: int = 0  # with router envoy: its listener and its admin
    envoy_admin_port: int = 0
    litellm_port: int = 0  # with router litellm: the proxy, and its handler's degrade endpoint
    litellm_admin_port: int = 0

    def model(self, lane: str) -> str:
        """The model name a lane serves: its own behind the gateway (which rewrites on a shift) and
        LiteLLM (a model group per lane); the slow lane's on both behind Envoy, which sends a
        shifted request unchanged."""
        return MODEL if self.router == "envoy" else MODELS[lane]

    @property
    def traffic_url(self) -> str:
        """Where the demo's traffic goes: the gateway, Envoy's listener or the LiteLLM proxy."""
        if self.router == "envoy":
            return self.url(self.envoy_port)
        if self.router == "litellm":
            return self.url(self.litellm_port)
        return self.gateway_url

    @property
    def litellm_yaml(self) -> Path:
        """The LiteLLM proxy's config."""
        return self.workdir / "litellm" / "litellm.yaml"

    @property
    def litellm_settings(self) -> Path:
        """lanewatch's handler settings (LANEWATCH_LITELLM_CONFIG)."""
        return self.workdir / "litellm" / "lanewatch-litellm.json"

    @property
    def litellm_cert_bundle(self) -> Path:
        """The simulators' certificates, which the LiteLLM proxy trusts."""
        return self.workdir / "litellm" / "lanes-ca.pem"

    @property
    def litellm_admin_url(self) -> str:
        """The handler's degrade endpoint in the proxy."""
        return self.url(self.litellm_admin_port)

    @property
    def envoy_yaml(self) -> Path:
        """Envoy's bootstrap."""
        return self.workdir / "envoy" / "envoy.yaml"

    @property
    def envoy_route_template(self) -> Path:
        """The route template the controller's envoy adapter renders."""
        return self.workdir / "envoy" / "routes.template.yaml"

    @property
    def envoy_route_file(self) -> Path:
        """The route file the adapter writes and Envoy watches (alone in its folder)."""
        return self.workdir / "envoy" / "routes" / "routes.yaml"

    def is_vllm(self, lane: str) -> bool:
        """True when a real vLLM serves the lane (plain HTTP, no fault API)."""
        return lane in self.vllm_lanes

    def lane_port(self, lane: str) -> int:
        """The port of a lane's server."""
        return self.fast_port if lane == "fast" else self.slow_port

    def lane_url(self, lane: str) -> str:
        """The base URL of a lane's server: HTTPS for a simulator, HTTP for vLLM."""
        scheme = "http" if self.is_vllm(lane) else "https"
        return f"{scheme}://127.0.0.1:{self.lane_port(lane)}"

    def cert(self, lane: str) -> Path | None:
        """The certificate a lane's simulator writes at start-up (clients trust it); None for vLLM."""
        return None if self.is_vllm(lane) else self.workdir / f"{lane}-cert.pem"

    def url(self, port: int) -> str:
        """http://127.0.0.1:port."""
        return f"http://127.0.0.1:{port}"

    @property
    def gateway_url(self) -> str:
        """The gateway's base URL (traffic goes here)."""
        return self.url(self.gateway_port)

    @property
    def collector_url(self) -> str:
        """The collector's base URL (/metrics, /v1/traces)."""
        return self.url(self.collector_port)

    @property
    def prometheus_url(self) -> str:
        """Prometheus' base URL."""
        return self.url(self.prometheus_port)

    @property
    def alertmanager_url(self) -> str:
        """Alertmanager's base URL."""
        return self.url(self.alertmanager_port)

    @property
    def degrade_url(self) -> str:
        """The degrade controller's base URL."""
        return self.url(self.degrade_port)

    def token_file(self, name: str) -> Path:
        """A secret's file (`sim-admin`, `gateway-admin`, `litellm-admin`, `degrade`)."""
        return self.workdir / "secrets" / f"{name}-token"

    @property
    def lanewatch_yaml(self) -> Path:
        """The collector's and gateway's config file."""
        return self.workdir / "lanewatch.yaml"

    @property
    def policy_yaml(self) -> Path:
        """The degrade controller's policy file."""
        return self.workdir / "degrade-policy.yaml"

    @property
    def prometheus_yaml(self) -> Path:
        """Prometheus' config file."""
        return self.workdir / "prometheus" / "prometheus.yml"

    @property
    def alertmanager_yaml(self) -> Path:
        """Alertmanager's config file."""
        return self.workdir / "alertmanager" / "alertmanager.yml"

    def records(self, part: str) -> Path:
        """The records file a part (`collector`, `gateway`) appends to."""
        return self.workdir / f"{part}-records.jsonl"

    def log(self, part: str) -> Path:
        """A child process's log file."""
        return self.workdir / "logs" / f"{part}.log"


def _scrape_targets(layout: Layout) -> dict[str, dict[str, Any]]:
    """Job name -> what replaces its static target (and how it is scraped)."""
    jobs: dict[str, dict[str, Any]] = {
        "lanewatch-collector": {"target": f"127.0.0.1:{layout.collector_port}"},
        "lanewatch-degrade": {"target": f"127.0.0.1:{layout.degrade_port}"},
    }
    if layout.router == "gateway":
        jobs["lanewatch-gateway"] = {"target": f"127.0.0.1:{layout.gateway_port}"}
    for lane in LANES:
        cert = layout.cert(lane)
        jobs[f"vllm-{lane}"] = {"target": f"127.0.0.1:{layout.lane_port(lane)}"}
        if cert is not None:
            jobs[f"vllm-{lane}"].update(scheme="https", tls_config={"ca_file": str(cert)})
    return jobs


def prometheus_config(
    template: dict[str, Any],
    layout: Layout,
    rules: Path = DEMO_RULES,
    alertmanager: bool = True,
    production: bool = False,
) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml for the demo: loopback targets, 1 s intervals, the demo rules.

    `production` keeps the template's own scrape and evaluation intervals (a test of the shipped
    timing); otherwise every job is scraped every second, whatever interval the template gives it.
    """
    cfg = copy.deepcopy(template)
    if not production:
        cfg.setdefault("global", {}).update(
            {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
        )
        for job in cfg.get("scrape_configs") or []:
            job.pop("scrape_interval", None)
            job.pop("scrape_timeout", None)
    cfg["rule_files"] = [str(rules)]
    am = [f"127.0.0.1:{layout.alertmanager_port}"]
    cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": am}]}]}
    if not alertmanager:  # rules still evaluate; alerts show in Prometheus only
        del cfg["alerting"]
    jobs = _scrape_targets(layout)
    if layout.router != "gateway":  # no gateway runs: its job would only fire the scrape alert
        cfg["scrape_configs"] = [
            j for j in cfg.get("scrape_configs") or [] if j.get("job_name") != GATEWAY_JOB
        ]
    seen = set()
    for job in cfg.get("scrape_configs") or []:
        name = job.get("job_name")
        if name not in jobs:
            raise TemplateError(
                f"prometheus.yml: scrape job {name!r} has no demo counterpart ({sorted(jobs)})"
            )
        seen.add(name)
        spec = jobs[name]
        statics = job.get("static_configs") or [{}]
        job["static_configs"] = [{**statics[0], "targets": [spec["target"]]}]
        job.update({k: v for k, v in spec.items() if k != "target"})
    missing = sorted(set(jobs) - seen)
    if missing:
        raise TemplateError(f"prometheus.yml: no scrape job for {missing}")
    return cfg


def alertmanager_config(template: dict[str, Any], layout: Layout, production: bool = False) -> dict[str, Any]:
    """deploy/alertmanager/alertmanager.yml for the demo: the controller on loopback, short group timers
    (`production` keeps the template's timers)."""
    cfg = copy.deepcopy(template)
    receivers = {r.get("name"): r for r in cfg.get("receivers") or []}
    degrade = receivers.get(DEGRADE_RECEIVER)
    if not degrade or not degrade.get("webhook_configs"):
        raise TemplateError(f"alertmanager.yml: no {DEGRADE_RECEIVER!r} receiver with a webhook_config")
    hook = degrade["webhook_configs"][0]
    hook["url"] = f"{layout.degrade_url}/alertmanager"
    hook.setdefault("http_config", {})["authorization"] = {
        "type": "Bearer",
        "credentials_file": str(layout.token_file("degrade")),
    }
    if production:
        return cfg
    route = cfg.setdefault("route", {})
    route.update({"group_wait": "1s", "group_interval": "2s"})
    for sub in route.get("routes") or []:
        if sub.get("receiver") == DEGRADE_RECEIVER:
            sub.update({"group_wait": "1s", "group_interval": "2s"})
    return cfg


def _cacert(layout: Layout, lane: str) -> dict[str, str]:
    cert = layout.cert(lane)
    return {} if cert is None else {"cacert": str(cert)}


def lanewatch_config(
    layout: Layout,
    probe_interval_s: float = 2.0,
    slo_spec: Path = DEMO_SPEC,
    classes: Sequence[RequestClass] | None = None,
    timeouts: Mapping[str, float] | None = None,
    fast_max_tokens: int = 32,
    guard: bool = False,
    probe_overlap: int = 1,
) -> dict[str, Any]:
    """The collector's and gateway's config: probe both lanes directly; route short answers
    (up to `fast_max_tokens`) fast; judge goodput by the SLOs whose rules Prometheus loads.

    `classes` replaces the probe's default request classes and `timeouts` its timeouts (the
    real engines' models take shorter prompts, and are slower). `guard` turns the fast guard on,
    firing into the run's Alertmanager."""
    targets = [
        {
            "name": f"vllm-{lane}",
            "url": layout.lane_url(lane),
            "lane": lane,
            "model": layout.model(lane),
            **_cacert(layout, lane),
        }
        for lane in LANES
    ]
    lanes = {
        lane: {"upstreams": [layout.lane_url(lane)], **_cacert(layout, lane), "models": [layout.model(lane)]}
        for lane in LANES
    }
    probe: dict[str, Any] = {
        "interval_s": probe_interval_s,
        "concurrency": 16,
        "overlap": probe_overlap,
        "timeouts": dict(timeouts or {"ttft_s": 20.0}),
    }
    if classes is not None:
        probe["classes"] = [c.model_dump(exclude_defaults=True) for c in classes]
    traffic = classes if classes is not None else DEFAULT_CLASSES
    cfg: dict[str, Any] = {
        "targets": targets,
        "probe": probe,
        "scrape": {"interval_s": 1.0, "window_s": 60.0},
        "export": {"window_s": 60.0, "slo_spec": str(slo_spec)},
        "server": {"host": "127.0.0.1", "port": layout.collector_port},
        # Every ingest path asks for the run's token (the guard may not run open).
        "ingest": {"token_file": str(layout.token_file("ingest"))},
        "gateway": {
            "server": {"host": "127.0.0.1", "port": layout.gateway_port},
            "lanes": lanes,
            "lane_order": list(LANES),
            "default_lane": "slow",
            # Short answers are cheap on the small model; everything else goes to the big one.
            "rules": {"max_tokens": [{"lane": "fast", "max": fast_max_tokens}]},
            # The demo's traffic is the operator's own and names its classes (x-lanewatch-class).
            "hints": {"trusted_networks": ["127.0.0.0/8"], "classes": [c.name for c in traffic]},
            "shift_seed": layout.seed,
            "health_interval_s": 1.0,
            # Tap records go to the collector, which joins them to the spans and exports them.
            "collector_url": layout.collector_url,
            "collector_token_file": str(layout.token_file("ingest")),
            "shipping": {"interval_s": 0.5},
        },
    }
    if guard:
        cfg["guard"] = {"enabled": True, "alertmanager_urls": [layout.alertmanager_url]}
    if layout.router == "envoy":  # Envoy's access log and spans come over OTLP/HTTP; the controller drives it
        cfg["degrade"] = {"adapters": [envoy_adapter_entry(layout)]}
    if layout.router == "litellm":  # the handler in the proxy ships records; the controller drives it
        cfg["degrade"] = {"adapters": [litellm_adapter_entry(layout)]}
    return cfg


def litellm_adapter_entry(layout: Layout) -> dict[str, Any]:
    """The controller's `degrade.adapters` entry for the demo's LiteLLM proxy (its handler's endpoint)."""
    return {
        "kind": "litellm",
        "url": layout.litellm_admin_url,
        "token_file": str(layout.token_file("litellm-admin")),
    }


def envoy_adapter_entry(layout: Layout) -> dict[str, Any]:
    """The controller's `degrade.adapters` entry for the demo's Envoy."""
    return {
        "kind": "envoy",
        "route_template": str(layout.envoy_route_template),
        "route_file": str(layout.envoy_route_file),
        "admin_url": layout.url(layout.envoy_admin_port),
    }


def policy_config(severities: Sequence[str] = ()) -> dict[str, Any]:
    """The controller's policy: one step shifts the whole slow lane; short holds, for a live demo.

    `severities`: act only on alerts of these severities (empty: any).
    """
    return {
        "version": 1,
        "lane_order": list(LANES),
        "shift_percents": [100],
        "min_hold_s": 15,
        "escalation_cooldown_s": 10,
        "recovery_stable_s": 5,
        "severities": list(severities),
    }


def read_template(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TemplateError(
            f"{path}: cannot read ({exc.strerror}); lanewatch's deploy/ files are missing from this install"
        ) from None
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise TemplateError(f"{path}: expected a mapping at the top")
    return data


# `ingest`: the collector's ingest token (ingest.token_file), which the gateway, Envoy, the LiteLLM
# handler and the lanes' span exporters send; the fast guard may not run without one.
SECRETS: Final = ("sim-admin", "gateway-admin", "litellm-admin", "degrade", "ingest")


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner only (mode 0600, also when it existed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def write_secrets(layout: Layout) -> dict[str, str]:
    """Fresh bearer tokens for the simulators', gateway's and LiteLLM handler's admin APIs, the
    controller and the collector's ingest (mode 0600), made anew for each run."""
    tokens = {}
    for name in SECRETS:
        tokens[name] = secrets.token_hex(16)
        write_private(layout.token_file(name), tokens[name] + "\n")
    return tokens


def write_configs(
    layout: Layout,
    deploy_dir: Path = DEPLOY_DIR,
    probe_interval_s: float = 2.0,
    with_alertmanager: bool = True,
    production: bool = False,
    act_on: Sequence[str] = (),
    classes: Sequence[RequestClass] | None = None,
    rules: Path | None = None,
    slo_spec: Path | None = None,
    timeouts: Mapping[str, float] | None = None,
    fast_max_tokens: int = 32,
    guard: bool = False,
    probe_overlap: int = 1,
) -> None:
    """Write every config file of the run into its workdir (secrets: `write_secrets`).

    `production`: the shipped rules (alerts/slos.yaml) at the shipped Prometheus and
    Alertmanager timings, instead of the demo's time-compressed ones. `act_on`: the alert
    severities the controller acts on (empty: any). `rules` and `slo_spec` replace the rule file
    Prometheus loads and the spec the collector judges goodput by (the real-engine demo's);
    `classes`, `timeouts`, `fast_max_tokens`, `guard` and `probe_overlap` go to `lanewatch_config`.
    """
    prom_template = read_template(deploy_dir / "prometheus" / "prometheus.yml")
    if rules is None:
        rules = PRODUCTION_RULES if production else DEMO_RULES
    if slo_spec is None:
        slo_spec = DEFAULT_SPEC if production else DEMO_SPEC
    prom = prometheus_config(prom_template, layout, rules, with_alertmanager, production)
    am_template = read_template(deploy_dir / "alertmanager" / "alertmanager.yml")
    am = alertmanager_config(am_template, layout, production)
    files = {
        layout.prometheus_yaml: prom,
        layout.alertmanager_yaml: am,
        layout.lanewatch_yaml: lanewatch_config(
            layout,
            probe_interval_s,
            slo_spec,
            classes,
            timeouts,
            fast_max_tokens,
            guard,
            probe_overlap,
        ),
        layout.policy_yaml: policy_config(act_on),
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    for folder in ("logs", "prometheus/data", "alertmanager/data", "degrade-state"):
        (layout.workdir / folder).mkdir(parents=True, exist_ok=True)
