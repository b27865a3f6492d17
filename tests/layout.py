"""The package layout as pyproject.toml declares it: the one source tests read it from."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def setuptools_table() -> dict[str, Any]:
    """pyproject's [tool.setuptools] table."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        table: dict[str, Any] = tomllib.load(f)["tool"]["setuptools"]
    return table


def package_dirs() -> dict[str, str]:
    """Import name -> folder (relative to the root) of each top-level mapped package."""
    return dict(setuptools_table()["package-dir"])


def folder_packages() -> dict[str, str]:
    """Folder -> import name, the inverse of `package_dirs`."""
    return {folder: name for name, folder in package_dirs().items()}


def listed_packages() -> list[str]:
    """pyproject's explicit `packages` list."""
    return list(setuptools_table()["packages"])


def package_data() -> dict[str, list[str]]:
    """Package -> the glob patterns of its shipped data files."""
    return {k: list(v) for k, v in setuptools_table().get("package-data", {}).items()}


def module_name(path: Path) -> str:
    """The import name of a file in a mapped folder: collector/cli/app.py -> lanewatch.collector.cli.app."""
    rel = path.resolve().relative_to(ROOT).with_suffix("")
    parts = [folder_packages()[rel.parts[0]], *rel.parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_packages() -> list[str]:
    """Every package the mapped folders hold on disk: each folder with an __init__.py."""
    found = []
    for folder in package_dirs().values():
        found += [module_name(init) for init in (ROOT / folder).rglob("__init__.py")]
    return sorted(set(found))
