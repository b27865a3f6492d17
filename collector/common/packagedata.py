"""Where lanewatch's files are: data shipped in its packages, and the source checkout it runs from."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path

from lanewatch.collector.common.errors import ConfigError, StartupError

__all__ = ["NoCheckoutError", "PackageDataError", "checkout_root", "data_path", "source_checkout"]


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
