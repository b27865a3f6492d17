"""The routers the conformance suite runs: each one line in ROUTERS, a factory over the two test lanes.

Each router is configured to choose lanes and classes the ways rows.py names, as far as its
config can. What it declares it cannot do is its `Declared`: the capabilities of its adapter's
settings class (the actions the controller can take through it, base.py `Capability`), and
named gaps (rows.GAPS) for what its routing cannot see, each with the reason. A divergence
from the reference that no declaration explains is a failure, or, while another change is
under way to fix it, a strict xfail naming it (`xfail`), which fails once the fix lands.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lanewatch.collector.degrade.adapters import Adapter, GatewaySettings
from lanewatch.collector.degrade.adapters.litellm import LitellmSettings
from tests.integration.degrade.routers import running_envoy, running_nginx
from tests.integration.gateway_harness import TRUST_LOOPBACK, gateway_server
from tests.litellm import litellm_python, start_proxy
from tests.servers import free_port

from .rows import (
    HUGE_PROMPT_CHARS,
    LANE_ORDER,
    LONG_MAX_TOKENS,
    MODELS,
    RETRY_AFTER_S,
    TAGGED_MODELS,
    TTFT_SLOS,
    Declared,
)

__all__ = ["ROUTERS", "Conformant", "Factory"]


@dataclass(frozen=True)
class Conformant:
    """A router under test: where clients send, its adapter, and what it declares it cannot do."""

    kind: str
    url: str
    adapter: Adapter
    declared: Declared
    settle_s: float  # after an apply the adapter confirmed: an nginx reload's old workers


Factory = Callable[[Path, dict[str, int]], AbstractAsyncContextManager[Conformant]]


@dataclass(frozen=True)
class Entry:
    """One router kind: its factory, the gaps its routing has (gap -> why), and known divergences."""

    factory: Factory
    gaps: Mapping[str, str] = field(default_factory=dict)
    # Why the router cannot rescue a streamed request whose first token is late (a second attempt on
    # a faster lane, the first token winning, as the gateway does); None: it can
    no_rescue: str | None = None
    # row -> the divergence a change under way fixes: run as xfail(strict=True), so the fix fails it
    xfail: Mapping[str, str] = field(default_factory=dict)


def declared(settings_capabilities: frozenset[str], gaps: Mapping[str, str]) -> Declared:
    """A router's declaration: its adapter's capabilities and its named gaps."""
    return Declared(frozenset(settings_capabilities), frozenset(gaps))  # type: ignore[arg-type]


# The class rules of every router that reads them (the gateway's gateway.classes, the LiteLLM
# handler's classes): the rows' class_of.
CLASSES: list[dict[str, object]] = [
    {"name": "tagged", "models": list(TAGGED_MODELS)},
    {"name": "long", "max_tokens": {"min": LONG_MAX_TOKENS}},
    {"name": "huge", "prompt_chars": {"min": HUGE_PROMPT_CHARS}},
    {"name": "bulk", "api": "completions"},
    {"name": "chat", "api": "chat"},
]


@asynccontextmanager
async def gateway(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Conformant]:
    """lanewatch's gateway in this loop, its lanes declaring their models: the reference semantics."""
    token = tmp_path / "admin.token"
    token.write_text("conformance-token\n")
    lanes = {
        lane: {"upstreams": [f"http://127.0.0.1:{p}"], "models": list(MODELS[lane])}
        for lane, p in ports.items()
    }
    cfg = {
        "lane_order": list(LANE_ORDER),
        "shed_retry_after_s": RETRY_AFTER_S,
        "default_lane": "slow",
        "hints": TRUST_LOOPBACK,  # the suite's client is the trusted hop that sets the headers
        "class_header": "x-tenant-tier",
        "classes": CLASSES,
        "rules": {"models": {m: "fast" for m in MODELS["fast"]}},
        "admin_token_file": str(token),
        "model_discovery": {"enabled": False},
        "ttft_slos": dict(TTFT_SLOS),  # the rescue row's
    }
    async with gateway_server(lanes, **cfg) as g:
        settings = GatewaySettings(url=g.url, token_file=token)
        adapter = settings.build()
        try:
            yield Conformant(
                "gateway", g.url, adapter, declared(settings.capabilities, ROUTERS["gateway"].gaps), 0.0
            )
        finally:
            await adapter.shutdown()


GATEWAY_GAPS = {"lane_by_path": "`gateway.rules` choose lanes by the header and the body, not the path"}

ENVOY_ROUTES = """\
classes:
  batch:
    headers: [{name: x-tenant-tier, string_match: {exact: batch}}]
  bulk:
    path: /v1/completions
  chat:  # a regex: a plain `path` shares no path with fast's /v1/completions route, and is refused
    safe_regex: {regex: "^/v1/chat/completions$"}
  long:  # by the work the Lua script reads from the body (envoy_work.py)
    work: {min: 1000}
retry_after_s: 30  # rows.RETRY_AFTER_S, as nginx's adapter default
route_config:
  name: lanes
  virtual_hosts:
    - name: llm
      domains: ["*"]
      routes:
        - match: {prefix: /, headers: [{name: x-lanewatch-lane, string_match: {exact: fast}}]}
          metadata: {filter_metadata: {lanewatch: {lane: fast}}}
          route: {cluster: fast, timeout: 0s}
        - match: {prefix: /, headers: [{name: x-lanewatch-lane, string_match: {exact: slow}}]}
          metadata: {filter_metadata: {lanewatch: {lane: slow}}}
          route: {cluster: slow, timeout: 0s}
        - match: {path: /v1/completions}
          metadata: {filter_metadata: {lanewatch: {lane: fast}}}
          route: {cluster: fast, timeout: 0s}
        - match: {prefix: /}
          metadata: {filter_metadata: {lanewatch: {lane: slow}}}
          route: {cluster: slow, timeout: 0s}
"""


@asynccontextmanager
async def envoy(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Conformant]:
    """Envoy from the shipped bootstrap, its route template choosing lanes and classes by header and path."""
    lanes = {lane: {"models": list(models)} for lane, models in MODELS.items()}
    with running_envoy(tmp_path, ports, lanes=lanes) as r:
        r.settings.route_template.write_text(ENVOY_ROUTES)  # type: ignore[union-attr]
        adapter = r.settings.build()
        try:
            gaps = ROUTERS["envoy"].gaps
            yield Conformant("envoy", r.url, adapter, declared(r.settings.capabilities, gaps), 0.3)
        finally:
            await adapter.shutdown()


NGINX_LANE = """map "$http_x_lanewatch_lane:$uri" $lanewatch_lane {
        default slow;
        ~^fast: fast;
        ~^slow: slow;
        ~^:/v1/completions$ fast;
    }"""
NGINX_CLASS = """map "$http_x_tenant_tier:$uri" $lanewatch_class {
        default "";
        ~^batch: batch;
        ~:/v1/completions$ bulk;
        ~:/v1/chat/completions$ chat;
    }"""


@asynccontextmanager
async def nginx(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Conformant]:
    """Debian's nginx from the shipped config, its maps choosing lanes and classes by header and path."""
    with running_nginx(tmp_path, ports) as r:
        conf = tmp_path / "nginx" / "nginx.conf"
        text = conf.read_text()
        lane = text[text.index("map $http_x_lanewatch_lane") :]
        text = text.replace(lane[: lane.index("}") + 1], NGINX_LANE)
        cls = text[text.index("map $http_x_tenant_tier") :]
        conf.write_text(text.replace(cls[: cls.index("}") + 1], NGINX_CLASS))  # each apply reloads it
        adapter = r.settings.build()
        try:
            gaps = ROUTERS["nginx"].gaps
            yield Conformant("nginx", r.url, adapter, declared(r.settings.capabilities, gaps), 1.5)
        finally:
            await adapter.shutdown()


BODY = "its routing reads headers and the path, never the request body"
PROXY_HEADERS = "a proxy in front of the upstream: it adds no lanewatch headers to what it passes on"
BODY_GAPS = {
    "lane_by_model": BODY,
    "class_by_model": BODY,
    "class_by_max_tokens": BODY,
    "class_by_prompt_chars": BODY,
    "lane_headers": PROXY_HEADERS,
}

ENVOY_GAPS = {
    "rewrite_on_route": "the Lua rewrite rides on a shift's cluster weight only",
    "refuses_unmatched_class": "a shed class needs a match rule in the route template's `classes`",
}


@asynccontextmanager
async def litellm(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Conformant]:
    """A real LiteLLM proxy with lanewatch's handler: one model group per model, each on its lane."""
    litellm_python()
    groups = {m: (f"http://127.0.0.1:{ports[lane]}", m) for lane, models in MODELS.items() for m in models}
    admin_port, token = free_port(), tmp_path / "admin.token"
    token.write_text("conformance-token\n")
    settings = {
        "lanes": {m: lane for lane, models in MODELS.items() for m in models},
        "lane_order": list(LANE_ORDER),
        "lane_groups": {lane: models[0] for lane, models in MODELS.items()},
        "class_header": "x-tenant-tier",
        "trust_class_header": True,  # the suite's client is the trusted hop that sets the header
        "classes": CLASSES,
        "shed_retry_after_s": RETRY_AFTER_S,
        "admin_port": admin_port,
        "admin_token_file": str(token),
    }
    proxy = start_proxy(tmp_path / "litellm", groups, settings, forward_headers=True)  # the lanes'
    # markers (x-conformance-id) reach them
    running = await asyncio.to_thread(proxy.__enter__)  # its start waits: the lanes serve meanwhile
    adapter = LitellmSettings(url=f"http://127.0.0.1:{admin_port}", token_file=token).build()
    try:
        gaps = ROUTERS["litellm"].gaps
        yield Conformant("litellm", running.url, adapter, declared(LitellmSettings.capabilities, gaps), 0.0)
    finally:
        await adapter.shutdown()
        await asyncio.to_thread(proxy.__exit__, None, None, None)


MODEL_ONLY = "LiteLLM chooses a deployment by the body's model group only"
LITELLM_GAPS = {
    "lane_by_header": MODEL_ONLY,
    "lane_by_path": MODEL_ONLY,
    "lane_headers": "LiteLLM's answers carry its own headers; only the shed 429 carries lanewatch's",
}

# A new router joins the suite with one line here; an adapter kind that moves no traffic itself
# says why in NOT_ROUTERS (test_table.py holds every registered kind to one of the two).
NOT_ROUTERS: dict[str, str] = {
    "webhook": "hands the state to the operator's own receiver, which routes as it likes",
    "dry-run": "logs the state and moves nothing",
}
ENVOY_NO_RESCUE = (
    "Envoy's hedge_policy hedges on a per-try timeout before the response's headers, and vLLM sends "
    "a streamed answer's headers before its prefill: a late first token is never a late head"
)
NGINX_NO_RESCUE = (
    "proxy_next_upstream moves a request to another server only before any of its answer was sent "
    "on, on an error or a timeout of the whole read, and never to another pool"
)
LITELLM_NO_RESCUE = (
    "its stream_timeout abandons a slow first chunk and falls back instead of racing it; the handler "
    "sets up none of it"
)
ROUTERS: dict[str, Entry] = {
    "gateway": Entry(gateway, GATEWAY_GAPS),
    "envoy": Entry(
        envoy,
        {**{k: v for k, v in BODY_GAPS.items() if k != "class_by_max_tokens"}, **ENVOY_GAPS},
        no_rescue=ENVOY_NO_RESCUE,
    ),
    "nginx": Entry(
        nginx,
        {**BODY_GAPS, "rewrite_on_route": "stock nginx cannot rewrite a body (no njs)"},
        no_rescue=NGINX_NO_RESCUE,
    ),
    "litellm": Entry(litellm, LITELLM_GAPS, no_rescue=LITELLM_NO_RESCUE),
}
