"""The Envoy route file before any degrade: what the bootstrap's `rds` path must hold to start.

Envoy refuses a bootstrap whose `path_config_source.path` does not exist (`envoy --mode
validate` too), and the controller writes the file only on its first reconcile. This writes
that first file from the route template, with no lane degraded, rendered as the envoy adapter
renders it.
"""

from __future__ import annotations

from pathlib import Path

from lanewatch.collector.common.input_files import data_path

from .envoy_render import parse_template, render, render_text
from .files import write_atomic

__all__ = ["default_template", "first_routes", "write_first_routes"]


def default_template() -> Path:
    """The shipped route template, deploy/envoy/routes.template.yaml."""
    return data_path("lanewatch.deploy", "envoy/routes.template.yaml")


def first_routes(template_text: str) -> str:
    """The route file's text for the template `template_text` with no lane degraded."""
    return render_text(render(parse_template(template_text), {}))


def write_first_routes(template: Path, out: Path, *, replace: bool = False) -> None:
    """Write the undegraded route file to `out` whole; FileExistsError when it is there and not `replace`.

    A file that is there may hold a live degrade the controller wrote: replacing it would undo
    that, so it takes `replace`.
    """
    text = first_routes(template.read_text(encoding="utf-8"))
    if out.exists() and not replace:
        raise FileExistsError(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, text)
