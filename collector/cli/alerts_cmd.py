"""`lanewatch alerts build|check`: Prometheus rules from a declarative SLO spec."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import typer

from .app import app

alerts_app = typer.Typer(
    rich_markup_mode=None,
    help="Generate and check Prometheus recording and alerting rules from an SLO spec.",
    no_args_is_help=True,
)
app.add_typer(alerts_app, name="alerts", short_help="Generate and check Prometheus rules from an SLO spec.")


@alerts_app.command("build")
def build(
    spec: list[Path] | None = typer.Option(
        None,
        "--spec",
        help="SLO spec file (lanewatch/v1, or openslo/v1 documents); repeat for several. "
        "Default: the bundled alerts/slos.yaml and alerts/slos-demo.yaml.",
        show_default=False,
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Folder for <spec name>-rules.yml. Default, in a source checkout only: its alerts/generated.",
        show_default=False,
    ),
    kubernetes: Path | None = typer.Option(
        None,
        "--kubernetes",
        help="Also write a PrometheusRule per spec into this folder. Without --spec and --out, "
        "the bundled default spec's PrometheusRule goes to deploy/kubernetes of the source checkout.",
        show_default=False,
    ),
) -> None:
    """Write rule files (headed "generated — do not edit"); exit 1 on an invalid spec."""
    from lanewatch.alerts import build as builder
    from lanewatch.alerts.spec import BUNDLED_SPECS, SpecError, load_spec
    from lanewatch.collector.common.input_files import NoCheckoutError

    try:
        if spec is None and out is None and kubernetes is None:
            outputs = builder.bundled_outputs()
        else:
            specs = [load_spec(p) for p in (spec or BUNDLED_SPECS)]
            folder = out or builder.checkout_dirs()[0]
            outputs = {folder / name: text for name, text in builder.rule_files(specs).items()}
            if kubernetes is not None:
                outputs.update({kubernetes / n: t for n, t in builder.prometheus_rules(specs).items()})
    except SpecError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    except NoCheckoutError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from None
    changed = set(builder.write(outputs))
    for path in outputs:
        typer.echo(f"{'wrote' if path in changed else 'unchanged'} {path}")


@alerts_app.command("check")
def check(
    spec: Path = typer.Option(..., "--spec", help="The SLO spec file to check.", show_default=False),
    promtool: bool = typer.Option(
        True, "--promtool/--no-promtool", help="Also run `promtool check rules` on the result when on PATH."
    ),
) -> None:
    """Validate a spec and the rules it generates; list its alerts; exit 1 on any error."""
    from lanewatch.alerts import render, rules
    from lanewatch.alerts.spec import SpecError, load_spec

    try:
        parsed = load_spec(spec)
        groups = rules.generate(parsed)
    except SpecError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    records = [r for g in groups for r in g.rules if r.record]
    alerts = sorted({r.alert for g in groups for r in g.rules if r.alert})
    typer.echo(
        f"{spec}: ok (spec {parsed.name!r}: {len(parsed.slos)} SLOs, {len(records)} recording rules, "
        f"{len(alerts)} alerts: {', '.join(alerts)})"
    )
    binary = shutil.which("promtool")
    if promtool and binary:
        _promtool(binary, render.rule_file(parsed, groups))


@alerts_app.command("docs")
def docs(
    out: Path | None = typer.Option(
        None,
        "--out",
        help="File to write. Default: docs/slo-spec.md of this source tree.",
        show_default=False,
    ),
) -> None:
    """Write the SLO spec reference (every field, type, default) generated from the spec models."""
    from lanewatch.alerts import specdoc

    path = out or specdoc.DOCS_PAGE
    if out is None and not path.parent.is_dir():
        typer.echo(f"{path.parent} does not exist (not a source checkout): pass --out FILE", err=True)
        raise typer.Exit(1)
    text = specdoc.render()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        typer.echo(f"unchanged {path}")
        return
    path.write_text(text, encoding="utf-8")
    typer.echo(f"wrote {path}")


def _promtool(binary: str, text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rules.yml"
        path.write_text(text, encoding="utf-8")
        result = subprocess.run(
            [binary, "check", "rules", str(path)], capture_output=True, text=True, check=False
        )
    if result.returncode != 0:
        typer.echo(f"promtool check rules failed:\n{result.stdout}{result.stderr}", err=True)
        raise typer.Exit(1)
    typer.echo("promtool check rules: ok")
