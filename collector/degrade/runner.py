"""Wiring for `lanewatch degrade serve`: secrets, policy, store, adapters, HTTP server, driver."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator
from pathlib import Path

import uvicorn
from prometheus_client import CollectorRegistry

from lanewatch.collector.common import secrets
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.common.serving import limits_of, uvicorn_config

from . import preflight
from .adapters import REGISTRY, Adapter, AdapterError
from .audit_diagnosis import DiagnosisContext, PrometheusWhy, Why
from .metrics import DegradeMetrics
from .policy import Policy, load_policy
from .server import Front, create_app
from .service import DegradeService
from .settings import DegradeConfig
from .store import StateStore, Store, lock_state_dir

__all__ = ["SetupError", "build_adapters", "build_why", "read_secret", "serve"]

log = logging.getLogger("lanewatch.degrade")


class SetupError(ConfigError):
    """The controller cannot start as configured; the message says which setting to fix."""


def read_secret(path: Path, what: str) -> str:
    """A token or key from a file; SetupError says what is wrong with it (never the secret)."""
    try:
        return secrets.read_secret(path, what)
    except ValueError as exc:
        raise SetupError(str(exc)) from None


def build_adapters(cfg: DegradeConfig) -> list[Adapter]:
    """The adapters of the config's `adapters` entries, their secrets read."""
    if not cfg.adapters:
        raise SetupError(
            f"no adapter: give --gateway URL, --adapter {'|'.join(REGISTRY.kinds())}, "
            "or degrade.adapters entries"
        )
    out: list[Adapter] = []
    for entry in cfg.adapters:
        try:
            out.append(entry.build())
        except AdapterError as exc:
            raise SetupError(f"adapter {entry.label}: {exc}") from None
    return out


def _token(cfg: DegradeConfig) -> str | None:
    if cfg.token_file is not None:
        return read_secret(cfg.token_file, "token file")
    if not cfg.insecure_dev:
        raise SetupError("refusing to start without --token-file (use --insecure-dev only on a dev machine)")
    log.warning("--insecure-dev: POST /alertmanager accepts posts WITHOUT authentication")
    return None


class _Server(uvicorn.Server):
    """uvicorn without its signal re-raise, so shutdown runs our cleanup."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._request_exit)
        try:
            yield
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    def _request_exit(self) -> None:
        self.should_exit = True


async def _check_lane_order(adapters: list[Adapter], policy: Policy) -> None:
    """Warn when a router's lane order differs from the policy's (its shifts would be refused)."""
    for adapter in adapters:
        try:
            view = await adapter.read_back()
        except AdapterError as exc:
            log.warning("could not read back what %s holds: %s", adapter.name, exc)
            continue
        if view is not None and view.lane_order is not None and view.lane_order != policy.lane_order:
            log.warning(
                "%s lane_order %s differs from the policy's %s",
                adapter.name,
                list(view.lane_order),
                list(policy.lane_order),
            )


def build_why(cfg: DegradeConfig, context: DiagnosisContext) -> Why | None:
    """The diagnosis each action takes into the audit log, when a Prometheus is configured."""
    if cfg.prometheus_url is None:
        return None
    return PrometheusWhy(
        cfg.prometheus_url, context, window=cfg.diagnose_window, timeout_s=cfg.diagnose_timeout_s
    )


async def serve(cfg: DegradeConfig, context: DiagnosisContext | None = None) -> None:
    """Run the controller until SIGINT or SIGTERM; `context` anchors the diagnoses of its actions.

    Alone (no `shared_store`) it leads at once on SQLite under `state_dir`; one of a pair
    campaigns for the lease first (pair.py).
    """
    token = _token(cfg)
    policy = load_policy(cfg.policy_file).with_hysteresis(
        cfg.min_hold_s, cfg.recovery_stable_s, cfg.escalation_cooldown_s
    )
    adapters = build_adapters(cfg)
    try:  # what a router would refuse in an incident stops the start instead
        preflight.check(policy, cfg.adapters)
    except ConfigError as exc:
        raise SetupError(str(exc)) from None
    metrics = DegradeMetrics(CollectorRegistry(), [a.name for a in adapters])
    why = build_why(cfg, context or DiagnosisContext())

    def leading(store: StateStore) -> DegradeService:
        return DegradeService(policy, store, adapters, metrics, why=why, apply_timeout_s=cfg.apply_timeout_s)

    if cfg.shared_store is not None:
        from .pair import serve_pair

        await serve_pair(cfg, cfg.shared_store, leading, metrics, token, serving)
        return
    lock = lock_state_dir(cfg.state_dir)
    service = leading(Store(cfg.state_dir))
    metrics.lead(lambda: True)
    service.resume()
    server = serving(cfg, Front(service), metrics, token)
    stop = asyncio.Event()
    driver = asyncio.create_task(service.run(stop, cfg.tick_s, cfg.reconcile_interval_s))
    check = asyncio.create_task(_check_lane_order(adapters, policy))
    try:
        await server.serve()
    finally:
        stop.set()
        check.cancel()
        await asyncio.gather(driver, check, return_exceptions=True)
        await service.shutdown()
        lock.close()


def serving(cfg: DegradeConfig, front: Front, metrics: DegradeMetrics, token: str | None) -> uvicorn.Server:
    """The controller's HTTP server over `front`, not yet started."""
    app = create_app(front, metrics, token, cfg.max_body_bytes)
    config = uvicorn_config(
        app,
        limits_of(cfg.server),
        host=cfg.server.host,
        port=cfg.server.port,
        log_level="info",
        lifespan="off",
    )
    return _Server(config)
