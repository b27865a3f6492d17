"""The gateway served on a port: the front (front/) listening with its routes, each path to its handler:
the completions to the request path (request_path.py), the rest to the front's own endpoints."""

from __future__ import annotations

import resource
from collections.abc import Awaitable, Callable, Mapping

from .front.admin import denied, get_degrade, put_degrade
from .front.connection import FrontConn, FrontLimits, Handler, HeadCheck, Request, Response
from .front.endpoints import healthz, metrics, models
from .front.errors import error_body, error_response
from .front.listener import FrontServer
from .request_path import handle_completion
from .state import Gateway

__all__ = ["GatewayServer", "default_max_connections", "head_check", "router"]

ADMIN_PATH = "/admin/degrade"
GatewayHandler = Callable[[Gateway, Request, FrontConn], Awaitable[Response | None]]


def router(
    gw: Gateway, overrides: Mapping[str, Mapping[str, Handler]] | None = None
) -> Callable[[str, str], Handler | Response]:
    """(method, path) → the handler, or the 404/405 answer in OpenAI error JSON; `overrides`
    replace the handlers of their paths (a worker's /metrics and admin API, processes/per_worker.py)."""

    def chat(request: Request, conn: FrontConn) -> Response | Awaitable[Response | None]:
        return handle_completion(gw, request, conn, "chat")

    def completions(request: Request, conn: FrontConn) -> Response | Awaitable[Response | None]:
        return handle_completion(gw, request, conn, "completions")

    def bind(fn: GatewayHandler) -> Handler:
        def handler(request: Request, conn: FrontConn) -> Awaitable[Response | None]:
            return fn(gw, request, conn)

        return handler

    routes: dict[str, dict[str, Handler]] = {
        "/v1/chat/completions": {"POST": chat},
        "/v1/completions": {"POST": completions},
        "/v1/models": {"GET": bind(models)},
        "/healthz": {"GET": bind(healthz)},
        "/metrics": {"GET": bind(metrics)},
        ADMIN_PATH: {"GET": bind(get_degrade), "PUT": bind(put_degrade)},
    }
    routes.update({path: dict(methods) for path, methods in (overrides or {}).items()})

    def resolve(method: str, path: str) -> Handler | Response:
        methods = routes.get(path)
        if methods is None:
            return error_response(404, f"Not Found: {method} {path}")
        handler = methods.get(method)
        if handler is None:
            allow = {"Allow": ", ".join(methods)}
            return error_response(405, f"Method Not Allowed: {method} {path}", headers=allow)
        return handler

    return resolve


def head_check(gw: Gateway) -> HeadCheck:
    """The admin API's credential check, made on the head before a body is asked for."""

    def check(_method: str, path: str, headers: Mapping[str, str]) -> Response | None:
        return denied(gw, headers) if path == ADMIN_PATH else None

    return check


class GatewayServer:
    """A gateway serving on a port: health checks and sessions started, connections accepted."""

    def __init__(self, gw: Gateway, overrides: Mapping[str, Mapping[str, Handler]] | None = None) -> None:
        self.gw = gw
        cfg = gw.cfg
        limits = FrontLimits(
            max_body=cfg.max_body_bytes,
            keepalive_s=cfg.keepalive_timeout_s,
            head_timeout_s=cfg.head_timeout_s,
            max_connections=cfg.max_connections or default_max_connections(),
        )
        self._front = FrontServer(
            router(gw, overrides),
            limits,
            lambda status, message: error_body(status, message),
            gw.stats.count_refused,
            head_check(gw),
        )
        self.port = 0

    async def start(self, host: str, port: int, reuse_port: bool = False) -> int:
        """Start the gateway's background work, then listen; returns the port."""
        await self.gw.start()
        self.port = await self._front.start(host, port, reuse_port)
        return self.port

    async def shutdown(self, drain_s: float = 0.0) -> None:
        """Stop accepting, give requests in flight `drain_s` to finish, drop the rest (their handlers
        finish and record), stop the gateway."""
        await self._front.shutdown(drain_s)
        await self.gw.shutdown()


def default_max_connections() -> int:
    """Half the open-file limit less a reserve (each proxied request also holds an upstream socket)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 10_000
    return max(8, min(10_000, (soft - 64) // 2))
