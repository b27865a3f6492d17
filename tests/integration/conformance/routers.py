"""The routers the conformance suite runs: each one line in ROUTERS, a factory over two test lanes.

Every router is configured to choose lanes and classes the same ways, as far as its config can:
lane by the `x-lanewatch-lane` header (a trusted hop's), lane `slow` for the path
`/v1/completions`, class `batch` by the `x-tenant-tier: batch` header and class `bulk` for the
path `/v1/completions`. What a router cannot choose by is declared in `matches`, not discovered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from lanewatch.collector.degrade.adapters import Adapter, GatewaySettings
from lanewatch.collector.degrade.adapters.base import Capability
from tests.integration.degrade.routers import running_envoy, running_nginx
from tests.integration.gateway_harness import TRUST_LOOPBACK, gateway_server

# Ways of choosing a lane or a class, beyond the adapter's actions (base.py `Capability`).
LANE_BY_HEADER, LANE_BY_PATH = "lane_by_header", "lane_by_path"
CLASS_BY_HEADER, CLASS_BY_PATH = "class_by_header", "class_by_path"
HEADER_AND_PATH = frozenset({LANE_BY_HEADER, LANE_BY_PATH, CLASS_BY_HEADER, CLASS_BY_PATH})


@dataclass(frozen=True)
class Conformant:
    """A router under test: where clients send, its adapter, and what it declares it can do."""

    kind: str
    url: str
    adapter: Adapter
    capabilities: frozenset[Capability]  # the adapter settings' declaration
    matches: frozenset[str]  # the ways it chooses lanes and classes
    settle_s: float  # after an apply the adapter confirmed: an nginx reload's old workers


Factory = Callable[[Path, dict[str, int]], AbstractAsyncContextManager[Conformant]]


@asynccontextmanager
async def gateway(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Conformant]:
    """lanewatch's gateway in this loop: the reference semantics."""
    token = tmp_path / "admin.token"
    token.write_text("conformance-token\n")
    lanes = {lane: [f"http://127.0.0.1:{p}"] for lane, p in ports.items()}
    cfg = {
        "lane_order": ["fast", "slow"],
        "default_lane": "fast",
        "hints": TRUST_LOOPBACK,
        "class_header": "x-tenant-tier",
        "classes": [{"name": "bulk", "api": "completions"}],
        "admin_token_file": str(token),
        "model_discovery": {"enabled": False},
    }
    async with gateway_server(lanes, **cfg) as g:
        settings = GatewaySettings(url=g.url, token_file=token)
        adapter = settings.build()
        try:
            # the gateway's lanes come from the header and the request body's rules, never the path
            yield Conformant("gateway", g.url, adapter, settings.capabilities,
                             frozenset({LANE_BY_HEADER, CLASS_BY_HEADER, CLASS_BY_PATH}), 0.0)  # fmt: skip
        finally:
            await adapter.shutdown()


ENVOY_ROUTES = """\
classes:
  batch:
    headers: [{name: x-tenant-tier, string_match: {exact: batch}}]
  bulk:
    path: /v1/completions
retry_after_s: 30
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
          metadata: {filter_metadata: {lanewatch: {lane: slow}}}
          route: {cluster: slow, timeout: 0s}
        - match: {prefix: /}
          metadata: {filter_metadata: {lanewatch: {lane: fast}}}
          route: {cluster: fast, timeout: 0s}
"""


@asynccontextmanager
async def envoy(tmp_path: Path, ports: dict[str, int]) -> AsyncIterator[Conformant]:
    """Envoy from the shipped bootstrap, its route template choosing lanes by header and path."""
    with running_envoy(tmp_path, ports) as r:
        r.settings.route_template.write_text(ENVOY_ROUTES)  # type: ignore[union-attr]
        adapter = r.settings.build()
        try:
            yield Conformant("envoy", r.url, adapter, r.settings.capabilities,
                             HEADER_AND_PATH, 0.2)  # fmt: skip
        finally:
            await adapter.shutdown()


NGINX_LANE = """map "$http_x_lanewatch_lane:$uri" $lanewatch_lane {
        default fast;
        ~^fast: fast;
        ~^slow: slow;
        ~^:/v1/completions$ slow;
    }"""
NGINX_CLASS = """map "$http_x_tenant_tier:$uri" $lanewatch_class {
        default "";
        ~^batch: batch;
        ~:/v1/completions$ bulk;
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
        conf.write_text(text.replace(cls[: cls.index("}") + 1], NGINX_CLASS))  # the first apply reloads it
        adapter = r.settings.build()
        try:
            yield Conformant("nginx", r.url, adapter, r.settings.capabilities,
                             HEADER_AND_PATH, 1.0)  # fmt: skip
        finally:
            await adapter.shutdown()


# A new router joins the suite with one line here.
ROUTERS: dict[str, Factory] = {"gateway": gateway, "envoy": envoy, "nginx": nginx}
