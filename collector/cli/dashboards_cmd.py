"""`lanewatch dashboards build`: Grafana dashboards as code."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app

dashboards_app = typer.Typer(
    rich_markup_mode=None, help="Generate the Grafana dashboards (grafanalib).", no_args_is_help=True
)
app.add_typer(dashboards_app, name="dashboards", short_help="Generate the Grafana dashboards.")


@dashboards_app.command("build")
def build(
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Folder for lanewatch-<name>.json. Default, in a source checkout only: its dashboards/generated "
        "(and the ConfigMap in its deploy/kubernetes).",
        show_default=False,
    ),
    kubernetes: Path | None = typer.Option(
        None,
        "--kubernetes",
        help="Also write the dashboards ConfigMap (Grafana sidecar label) into this folder.",
        show_default=False,
    ),
) -> None:
    """Write every dashboard's JSON (headed "generated — do not edit" in its description)."""
    from lanewatch.alerts.build import write
    from lanewatch.collector.common.input_files import NoCheckoutError
    from lanewatch.dashboards.build import outputs

    try:
        files = outputs(out, kubernetes)
    except NoCheckoutError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    changed = set(write(files))
    for path in files:
        typer.echo(f"{'wrote' if path in changed else 'unchanged'} {path}")
