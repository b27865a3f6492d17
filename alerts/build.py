"""`lanewatch alerts build`: specs -> rule files and PrometheusRule objects; pure render, thin write."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Final

from . import render, rules
from .model import Spec
from .spec import BUNDLED_SPECS, DEFAULT_SPEC, load_spec

GENERATED_DIR: Final = Path(__file__).resolve().parent / "generated"
# deploy/kubernetes of a source checkout; absent from an installed wheel.
KUBERNETES_DIR: Final = Path(__file__).resolve().parent.parent / "deploy" / "kubernetes"


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
    """Every generated file committed in the source tree, at its path: what `alerts build` rebuilds."""
    specs = [load_spec(p) for p in BUNDLED_SPECS]
    default = [s for s, p in zip(specs, BUNDLED_SPECS, strict=True) if p == DEFAULT_SPEC]
    out = {GENERATED_DIR / name: text for name, text in rule_files(specs).items()}
    if KUBERNETES_DIR.parent.is_dir():  # a source checkout, not an installed wheel
        out.update({KUBERNETES_DIR / name: text for name, text in prometheus_rules(default).items()})
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
