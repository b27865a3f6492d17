"""The root `lanewatch` Typer app; each command module registers itself on it."""

from __future__ import annotations

import typer

app = typer.Typer(
    rich_markup_mode=None,
    name="lanewatch",
    help=(
        "Latency observability and SLOs for LLM serving with vLLM: measure every request "
        "phase by phase, export Prometheus metrics and traces, generate alerts and "
        "dashboards, and degrade traffic when an SLO burns."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def package_version() -> str:
    """The installed lanewatch version."""
    from importlib.metadata import PackageNotFoundError, version  # only for --version

    try:
        return version("lanewatch")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0+unknown"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"lanewatch {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Latency observability and SLOs for LLM serving with vLLM."""
