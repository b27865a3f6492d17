"""`envoy`: Envoy (1.40) with its routes read from a file (RDS `path_config_source`), no xDS server.

Each apply renders the operator's route template with the degrade state (envoy_render.py),
checks the result with `envoy --mode validate` (a bootstrap holding the routes inline),
renames it over `route_file` in Envoy's watched directory, and waits for Envoy's admin
stats to count it: `rds.<name>.update_success` (taken) or `rds.<name>.update_rejected`
(refused: the previous file is put back, and Envoy keeps serving the routes it held).

- Shift: the lane's marked route sends `shift_percent` of its requests to the faster
  lane's cluster (`weighted_clusters`, in tenths of a percent). Where `lanes` declares the
  lanes' models and they differ, the requests Envoy sends to the faster cluster get their
  body's `model` rewritten to one the faster lane serves, by a Lua script on that cluster
  weight (envoy_lua.py); the bootstrap's listener needs the Lua filter, which is checked.
- Shed: a `direct_response` 429 with `retry-after` for the shed class's requests, ahead of the
  lane's route; the template's `classes` rules decide the class, nothing else does. A class by
  work (`{work: {min, max}}`) has no route: the Lua script on the lane's routes reads the body's
  work and sheds it (envoy_work.py). A request shifted to a lane obeys that lane's shed too (the
  serving lane's, as at the gateway).
- Cap: the same script bounds the request's work (max_tokens x `n` or `best_of` x prompts) by
  the smaller cap of the lane and the lane serving it, rewriting `max_tokens` as the gateway does.
- Read-back: Envoy's `/config_dump` of the route configuration, read into lanes.
- Cannot: class a request by anything else in its body (its model, its prompt's size), or rewrite
  the model of a request a route (not a shift) sends to a lane that does not serve it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, Literal

import httpx
import yaml
from pydantic import Field

from lanewatch.collector.common.validation import HttpUrl, LaneName
from lanewatch.collector.degrade_state.served_models import ServedModels
from lanewatch.collector.degrade_state.wire import LaneDegrade

from .base import Adapter, AdapterError, AdapterSettings, Capability, RouterView
from .envoy_lua import LUA_TYPE
from .envoy_render import (
    EnvoyTemplate,
    ModelRewrite,
    held_lanes,
    parse_template,
    render,
    render_text,
    rewrites_model,
    validation_bootstrap,
)
from .files import find_binary, read_text, run_command, write_atomic

__all__ = ["EnvoyAdapter", "EnvoySettings"]

log = logging.getLogger("lanewatch.degrade.adapters")
CAPABILITIES: frozenset[Capability] = frozenset({"shift", "cap_max_tokens", "shed", "rewrite_model"})


class EnvoyAdapter:
    """Envoy: the route file rendered, validated, renamed into place, confirmed from admin stats."""

    capabilities: frozenset[Capability] = CAPABILITIES

    def __init__(self, settings: EnvoySettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.name = settings.label
        self._s = settings
        self._client = httpx.AsyncClient(
            base_url=settings.admin_url, timeout=settings.timeout_s, transport=transport
        )
        self._confirmed: str | None = None  # the route file text Envoy was last seen to take
        self._has_lua = False  # Envoy's listeners were seen to run the Lua filter

    def __repr__(self) -> str:
        return f"EnvoyAdapter({str(self._s.route_file)!r}, admin={self._s.admin_url!r})"

    def template(self) -> EnvoyTemplate:
        """The route template, read again on each apply so an edit takes effect at the next one."""
        return _read_template(self._s.route_template)

    async def apply(self, lanes: dict[str, LaneDegrade], revision: int) -> None:
        """Render, validate, move into place and confirm; the file on disk is left valid throughout."""
        template = self.template()
        rewrite = ModelRewrite(self._s.lanes, self._s.rewrite_max_bytes)
        routes = render(template, lanes, rewrite)
        text = render_text(routes)
        previous = read_text(self._s.route_file)
        if text == previous == self._confirmed:
            return
        if rewrites_model(routes):
            await self._check_lua_filter()
        await self._validate(template, text)
        before = await self._counters(template.name)
        write_atomic(self._s.route_file, text)
        taken = await self._confirm(template.name, before)
        if not taken:
            if previous is not None:
                write_atomic(self._s.route_file, previous)
            raise AdapterError(
                f"envoy rejected route configuration {template.name!r} "
                f"(rds.{template.name}.update_rejected); it keeps the routes it held, "
                "and the previous file is back in place",
                retryable=False,
            )
        self._confirmed = text
        log.info("envoy %s took revision %d: %s", self.name, revision, sorted(lanes))

    async def _validate(self, template: EnvoyTemplate, text: str) -> None:
        if not self._s.validate_with_envoy:
            return
        binary = self._s.envoy_binary or find_binary("envoy")
        if binary is None:
            raise AdapterError("no envoy binary to validate with (set envoy_binary)", retryable=False)
        route_config = yaml.safe_load(text)["resources"][0]
        route_config.pop("@type")
        with tempfile.TemporaryDirectory(prefix="lanewatch-envoy-") as folder:
            path = Path(folder) / "validate.yaml"
            path.write_text(yaml.safe_dump(validation_bootstrap(route_config)), encoding="utf-8")
            argv = [binary, "--mode", "validate", "-c", str(path), "--log-level", "error"]
            code, output = await run_command(argv, self._s.validate_timeout_s)
        if code != 0:
            reason = " ".join(line for line in output.splitlines() if line.strip())[-600:]
            raise AdapterError(
                f"rendered routes do not validate (envoy --mode validate): {reason}", retryable=False
            )

    async def _check_lua_filter(self) -> None:
        """AdapterError unless Envoy's listeners run the Lua filter the rewrite and the work ride on."""
        if self._has_lua:
            return
        listeners = await self._admin_get("/config_dump", resource="static_listeners")
        if f'"{LUA_TYPE}"' not in listeners:
            raise AdapterError(
                "the routes carry lanewatch's Lua script (a shift's model rewrite, or a shed or cap by "
                "work), but Envoy's listener has no Lua filter (envoy.filters.http.lua before the router "
                "in http_filters, as deploy/envoy/bootstrap.yaml has it): Envoy would skip the script",
                retryable=False,
            )
        self._has_lua = True

    async def _counters(self, name: str) -> tuple[int, int]:
        """(update_success, update_rejected) of the route configuration, from the admin stats.

        Envoy names them `http.<stat_prefix>.rds.<name>.update_*`, one set per listener that
        uses the configuration; the sums count every listener's view.
        """
        pattern = f"\\.rds\\.{re.escape(name)}\\.update_(success|rejected)$"
        stats = await self._admin_get("/stats", filter=pattern)
        counts = {"success": 0, "rejected": 0}
        seen = False
        for line in stats.splitlines():
            key, _, value = line.partition(": ")
            head, _, kind = key.rpartition(".update_")
            if head.endswith(f".rds.{name}") and kind in counts and value.strip().isdigit():
                counts[kind] += int(value)
                seen = seen or kind == "success"
        if not seen:
            raise AdapterError(
                f"envoy has no route configuration {name!r} (no rds.{name}.update_success stat): is its "
                "bootstrap's rds route_config_name the template's route_config.name?",
                retryable=True,
            )
        return counts["success"], counts["rejected"]

    async def _confirm(self, name: str, before: tuple[int, int]) -> bool:
        """True once Envoy counts the new file taken, False once it counts it rejected."""
        deadline = time.monotonic() + self._s.confirm_timeout_s
        while True:
            success, rejected = await self._counters(name)
            if rejected > before[1]:
                return False
            if success > before[0]:
                return True
            if time.monotonic() >= deadline:
                raise AdapterError(
                    f"envoy did not count the new route file within {self._s.confirm_timeout_s} s: does its "
                    f"bootstrap watch {self._s.route_file.parent}?",
                    retryable=True,
                )
            await asyncio.sleep(0.05)

    async def _admin_get(self, path: str, **params: str) -> str:
        """The text an admin endpoint answers with 200; a retryable AdapterError otherwise."""
        try:
            # Whole: an answer trickled byte by byte trips no per-read timeout.
            async with asyncio.timeout(self._s.timeout_s):
                response = await self._client.get(path, params=params)
        except TimeoutError:
            raise AdapterError(
                f"envoy admin {self._s.admin_url}: no whole answer within {self._s.timeout_s:g} s",
                retryable=True,
            ) from None
        except httpx.HTTPError as exc:
            raise AdapterError(
                f"envoy admin {self._s.admin_url}: {type(exc).__name__}", retryable=True
            ) from None
        if response.status_code != 200:
            raise AdapterError(f"envoy admin {path} answered {response.status_code}", retryable=True)
        return response.text

    async def read_back(self) -> RouterView:
        """The lanes in the route configuration Envoy holds (`/config_dump`)."""
        template = self.template()
        text = await self._admin_get("/config_dump", resource="dynamic_route_configs")
        try:
            data = json.loads(text)
        except ValueError:
            raise AdapterError("envoy admin /config_dump: not JSON", retryable=True) from None
        for entry in data.get("configs", []) if isinstance(data, dict) else []:
            rc = entry.get("route_config") if isinstance(entry, dict) else None
            if isinstance(rc, dict) and rc.get("name") == template.name:
                return RouterView(lanes=held_lanes(template, rc))
        raise AdapterError(f"envoy holds no route configuration {template.name!r}", retryable=True)

    async def finalize(self, revision: int) -> None:
        """The template as written: no degrade on any lane."""
        await self.apply({}, revision)

    async def shutdown(self) -> None:
        """Close the admin connection; Envoy keeps the routes it holds."""
        await self._client.aclose()


def _read_template(path: Path) -> EnvoyTemplate:
    text = read_text(path)
    if text is None:
        raise AdapterError(f"route template {path} not found", retryable=False)
    return parse_template(text)


class EnvoySettings(AdapterSettings):
    """Envoy's file-based routes (RDS from a file), rendered from the operator's route template."""

    kind: Literal["envoy"] = "envoy"
    route_template: Path = Path(
        "/etc/lanewatch/envoy/routes.template.yaml"
    )  # the operator's routes, lanes marked
    route_file: Path = Path("/var/lib/lanewatch/envoy/routes.yaml")  # the bootstrap's path_config_source.path
    admin_url: HttpUrl = "http://127.0.0.1:9901"  # Envoy's admin: loopback only, it has no authentication
    timeout_s: float = Field(default=5.0, gt=0)  # one admin call
    confirm_timeout_s: float = Field(default=5.0, gt=0)  # for Envoy to count the new file taken or rejected
    validate_with_envoy: bool = True  # `envoy --mode validate` before the file is moved into place
    envoy_binary: str | None = None  # default: envoy beside this Python, then on PATH
    validate_timeout_s: float = Field(default=20.0, gt=0)
    # Each lane's models, as gateway.lanes.<lane>.models and model_map declare them: a shift
    # between lanes whose models differ rewrites the moved requests' `model`. Empty: no rewrite.
    lanes: dict[LaneName, ServedModels] = Field(default_factory=dict)
    # The largest request body the rewrite buffers; a larger shifted request is refused with 413.
    # The shifted route's request_body_buffer_limit is rendered to hold it (and 64 KiB more).
    rewrite_max_bytes: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024)

    capabilities: ClassVar[frozenset[Capability]] = CAPABILITIES

    def renderer(self) -> Callable[[dict[str, LaneDegrade]], object]:
        """The route configuration an apply renders for a state, from the template as it is now."""
        template = _read_template(self.route_template)
        rewrite = ModelRewrite(self.lanes, self.rewrite_max_bytes)
        return lambda lanes: render(template, lanes, rewrite)

    def build(self) -> Adapter:
        """The adapter; its template must parse now, so a broken one stops the controller at start."""
        adapter = EnvoyAdapter(self)
        adapter.template()
        if not self.route_file.parent.is_dir():
            raise AdapterError(
                f"route_file's folder {self.route_file.parent} does not exist", retryable=False
            )
        return adapter
