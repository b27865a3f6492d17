"""The files lanewatch reads: YAML loaded into pydantic models, every problem a `ConfigIssue` naming
its field and line; and where its own files are: data shipped in its packages, and the source
checkout it runs from."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from lanewatch.collector.common.errors import ConfigError, StartupError

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "NoCheckoutError",
    "PackageDataError",
    "checkout_root",
    "data_path",
    "load_yaml_model",
    "read_yaml_mapping",
    "source_checkout",
    "validation_issues",
    "yaml_line_index",
]


M = TypeVar("M", bound=BaseModel)


class ConfigIssue(BaseModel):
    """One problem found in a config: where, and what is wrong."""

    path: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.path} (line {self.line})" if self.line else self.path
        return f"{where}: {self.message}"


def load_yaml_model(path: Path, model: type[M]) -> M:
    """Load one YAML file into `model`; ConfigError names every bad field with its line."""
    data, lines = read_yaml_mapping(path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(str(path), validation_issues(exc, lines)) from None


def read_yaml_mapping(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """Read a YAML mapping and the line of every key in it; ConfigError when unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), [ConfigIssue(path="(file)", message=exc.strerror or str(exc))]) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise ConfigError(str(path), [ConfigIssue(path="(yaml)", message=str(exc), line=line)]) from None
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), [ConfigIssue(path="(root)", message="must be a mapping", line=1)])
    lines: dict[tuple[str, ...], int] = {}
    yaml_line_index(node, (), lines)
    return data, lines


def yaml_line_index(node: yaml.Node | None, prefix: tuple[str, ...], out: dict[tuple[str, ...], int]) -> None:
    """Record the line of every key and list item under `node`, keyed by its path."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = (*prefix, str(key.value))
            out[path] = key.start_mark.line + 1
            yaml_line_index(value, path, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            path = (*prefix, str(i))
            out[path] = item.start_mark.line + 1
            yaml_line_index(item, path, out)


def validation_issues(exc: ValidationError, lines: dict[tuple[str, ...], int]) -> list[ConfigIssue]:
    """Turn pydantic errors into issues carrying the nearest YAML line."""
    issues = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        line = None
        for n in range(len(loc), 0, -1):  # nearest enclosing key that YAML placed
            if loc[:n] in lines:
                line = lines[loc[:n]]
                break
        path = ".".join(loc) or "(root)"
        issues.append(ConfigIssue(path=path, message=err["msg"], line=line))
    return issues


class PackageDataError(StartupError, RuntimeError):
    """Package data that is not on the filesystem (a zipped install), or missing."""


class NoCheckoutError(ConfigError, RuntimeError):
    """A default output folder asked for where there is none: lanewatch is installed, not a checkout."""


def data_path(package: str, name: str = "") -> Path:
    """A file or folder shipped in `package` (e.g. "lanewatch.deploy", "prometheus/prometheus.yml")."""
    root = resources.files(package)
    # Prometheus, Alertmanager and promtool are handed these files by path, so they must be
    # real files: wheels install unzipped, and an editable install resolves to the checkout.
    if not isinstance(root, Path):
        raise PackageDataError(f"{package} is not installed as plain files ({root!r})")
    path = root / name if name else root
    if not path.exists():
        raise PackageDataError(f"{package} has no {name!r} ({path}); the install is incomplete")
    return path


@functools.cache
def source_checkout() -> Path | None:
    """The root of the source checkout lanewatch runs from (editable install), or None when installed."""
    root = data_path("lanewatch.alerts").resolve().parent
    return root if (root / "pyproject.toml").is_file() and (root / "deploy").is_dir() else None


def checkout_root() -> Path:
    """The source checkout's root; NoCheckoutError (which says to pass --out) when running installed."""
    root = source_checkout()
    if root is None:
        raise NoCheckoutError("lanewatch runs from an install, not a source checkout: pass --out DIR")
    return root
