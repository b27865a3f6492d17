"""One error tree: every error lanewatch raises on purpose derives from LanewatchError, by one kind."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import Counter

import httpx

from lanewatch.collector.common.errors import (
    ConfigError,
    LanewatchError,
    ProtocolViolation,
    StartupError,
    UpstreamError,
)

KINDS = (ConfigError, StartupError, ProtocolViolation, UpstreamError)
ROOMS = ("lanewatch.collector", "lanewatch.exporters", "lanewatch.alerts", "lanewatch.dashboards")
# Signals, not errors: raised for control flow and caught inside their room, never shown to a user.
SIGNALS = {"lanewatch.collector.diagnose.evidence.Missing"}


def _errors() -> list[type[BaseException]]:
    """Every public exception class defined in lanewatch's rooms (the simulator stands apart: vLLM's)."""
    found: list[type[BaseException]] = []
    for room in ROOMS:
        package = importlib.import_module(room)
        names = [room] + [m.name for m in pkgutil.walk_packages(package.__path__, f"{room}.")]
        for name in names:
            module = importlib.import_module(name)
            found += [
                cls
                for cls_name, cls in vars(module).items()
                if inspect.isclass(cls)
                and issubclass(cls, BaseException)
                and cls.__module__ == name
                and not cls_name.startswith("_")
            ]
    return found


def test_the_walk_finds_the_rooms_errors() -> None:
    names = {cls.__name__ for cls in _errors()}
    assert {"WebhookError", "OtlpError", "AdapterError", "ConfigError", "SecretError"} <= names


def test_every_error_derives_from_one_kind() -> None:
    stray = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _errors()
        if f"{cls.__module__}.{cls.__qualname__}" not in SIGNALS
        and not (
            issubclass(cls, LanewatchError)
            and (cls is LanewatchError or cls in KINDS or issubclass(cls, KINDS))
        )
    ]
    assert stray == []


def test_each_signal_is_one_the_walk_finds() -> None:
    assert {f"{cls.__module__}.{cls.__qualname__}" for cls in _errors()} >= SIGNALS  # none stale


def test_no_two_errors_share_a_name_and_none_borrows_httpx_s() -> None:
    errors = _errors()
    twice = [name for name, n in Counter(cls.__name__ for cls in errors).items() if n > 1]
    assert twice == []
    borrowed = {
        name for name, obj in vars(httpx).items() if inspect.isclass(obj) and issubclass(obj, Exception)
    }
    assert sorted({cls.__name__ for cls in errors} & borrowed) == []
