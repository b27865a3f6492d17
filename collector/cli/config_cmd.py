"""`lanewatch config`: check a config file before a service uses it."""

from __future__ import annotations

from pathlib import Path

import typer

from .app import app

config_app = typer.Typer(
    rich_markup_mode=None, help="Check and show lanewatch configuration.", no_args_is_help=True
)
app.add_typer(config_app, name="config", short_help="Check and show lanewatch configuration.")


@config_app.command("check")
def check(
    file: Path = typer.Argument(..., help="The YAML config file to validate.", show_default=False),
    show: bool = typer.Option(False, "--show", help="Print the effective config (defaults filled in)."),
) -> None:
    """Validate FILE (with LANEWATCH__ environment overrides); list every error and exit 1 on any.

    With degrade adapters, each renders every state the degrade policy can ask for, as the
    controller does at start: a state a router would refuse is an error here.
    """
    from lanewatch.collector.config import ConfigError, load_config

    try:
        cfg = load_config(file)
    except ConfigError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    if cfg.degrade.adapters:  # what a router would refuse in an incident, found now
        from lanewatch.collector.degrade import preflight
        from lanewatch.collector.degrade.policy import load_policy

        try:
            preflight.check(load_policy(cfg.degrade.policy_file), cfg.degrade.adapters)
        except ConfigError as exc:
            typer.echo(f"{file}: {exc}", err=True)
            raise typer.Exit(1) from None
    if show:
        typer.echo(cfg.model_dump_json(indent=2))
    typer.echo(f"{file}: ok ({len(cfg.targets)} targets, {len(cfg.probe.classes)} request classes)")
