"""`lanewatch alerts build`: specs -> rule files and PrometheusRule objects; pure render, thin write."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final

from lanewatch.collector.common.input_files import checkout_root, data_path

from . import render, rules
from .model import Spec
from .spec import BUNDLED_SPECS, DEFAULT_SPEC, load_spec

# The committed rule files, shipped as package data (the demo's Prometheus loads them from here).
GENERATED_DIR: Final = data_path("lanewatch.alerts", "generated")
# deploy/kubernetes, shipped too; `alerts build` writes into it only in a source checkout.
KUBERNETES_DIR: Final = data_path("lanewatch.deploy", "kubernetes")


def checkout_dirs() -> tuple[Path, Path]:
    """alerts/generated and deploy/kubernetes of the source checkout (NoCheckoutError when installed)."""
    root = checkout_root()
    return root / "alerts" / "generated", root / "deploy" / "kubernetes"


def rule_file_name(spec: Spec) -> str:
    """alerts/generated/<spec name>-rules.yml."""
    return f"{spec.name}-rules.yml"


def prometheus_rule_name(spec: Spec) -> str:
    """deploy/kubernetes/prometheusrule-<spec name>.yaml."""
    return f"prometheusrule-{spec.name}.yaml"


def rule_files(specs: Iterable[Spec]) -> dict[str, str]:
    """File name -> rule file text for each spec (validated: raises SpecError)."""
    return {rule_file_name(s): render.rule_file(s, rules.generate(s)) for s in specs}


def prometheus_rules(specs: Iterable[Spec]) -> dict[str, str]:
    """File name -> PrometheusRule manifest text for each spec."""
    return {prometheus_rule_name(s): render.prometheus_rule(s, rules.generate(s)) for s in specs}


def bundled_outputs() -> dict[Path, str]:
    """Every generated file committed in the source checkout, at its path: what `alerts build` rebuilds."""
    specs = [load_spec(p) for p in BUNDLED_SPECS]
    default = [s for s, p in zip(specs, BUNDLED_SPECS, strict=True) if p == DEFAULT_SPEC]
    generated, kubernetes = checkout_dirs()
    out = {generated / name: text for name, text in rule_files(specs).items()}
    out.update({kubernetes / name: text for name, text in prometheus_rules(default).items()})
    return out


def write(outputs: dict[Path, str]) -> list[Path]:
    """Write each file (creating folders); return the paths whose content changed."""
    changed = []
    for path, text in outputs.items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        changed.append(path)
    return changed
