"""What every config section shares (unknown keys are errors, where a service listens), and command-line
flags laid over a validated config, validated again.

Here, not in collector/config.py, so that each room's own settings module can build on them
without importing the config that composes it. A flag overrides one field by its dotted path
(`server.port`); the result goes through the same pydantic validation as the file, so a flag
cannot set what the file could not, and an error names the flag and the field. Pure; no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings

from lanewatch.collector.common.errors import ConfigError

__all__ = ["Flag", "OverrideError", "Section", "ServerConfig", "override"]


class Section(BaseModel):
    """Base for config sections: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(Section):
    """Where a lanewatch service listens."""

    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)
    max_connections: int = Field(default=256, ge=1)  # requests past it are answered 503
    keep_alive_s: int = Field(default=5, ge=1)  # an idle kept-alive connection is closed after this
    head_timeout_s: float = Field(default=10.0, gt=0)  # a request head must be complete within this


M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class Flag:
    """A flag's name as the user typed it (`--port`) and its value."""

    name: str
    value: object


class OverrideError(ConfigError, ValueError):
    """Flags that do not validate; one line per problem, each naming its flag and field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(["invalid settings:", *(f"  {p}" for p in problems)]))
        self.problems = problems


def override(model: M, flags: Mapping[str, Flag], where: str = "") -> M:
    """`model` with each dotted field path set to its flag's value, validated again.

    `where` prefixes field paths in errors (`gateway.`). A settings model (environment
    overrides) is validated section by section, so the environment does not win over flags.
    """
    if not flags:
        return model
    if isinstance(model, BaseSettings):
        return _by_section(model, flags, where)
    data = model.model_dump()
    for path, flag in flags.items():
        _put(data, path.split("."), flag.value)
    try:
        return type(model).model_validate(data)
    except ValidationError as exc:
        raise OverrideError([_problem(err, flags, where) for err in exc.errors()]) from None


def _by_section(model: M, flags: Mapping[str, Flag], where: str) -> M:
    sections: dict[str, dict[str, Flag]] = {}
    for path, flag in flags.items():
        head, _, rest = path.partition(".")
        if not rest or not isinstance(getattr(model, head, None), BaseModel):
            raise ValueError(f"{flag.name}: {where}{path} is not a field of a config section")
        sections.setdefault(head, {})[rest] = flag
    updates: dict[str, Any] = {}
    problems: list[str] = []
    for head, sub in sections.items():
        try:
            updates[head] = override(getattr(model, head), sub, f"{where}{head}.")
        except OverrideError as exc:
            problems.extend(exc.problems)
    if problems:
        raise OverrideError(problems)
    return model.model_copy(update=updates)


def _put(data: dict[str, Any], keys: list[str], value: object) -> None:
    for key in keys[:-1]:
        data = data.setdefault(key, {})
    data[keys[-1]] = value


def _problem(error: Any, flags: Mapping[str, Flag], where: str) -> str:
    loc = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    for path, flag in flags.items():
        if loc == path or loc.startswith(path + "."):
            return f"{flag.name} ({where}{loc}): {message}"
    field = f"{where}{loc}".rstrip(".") or "(settings)"
    return f"{field}: {message}"
