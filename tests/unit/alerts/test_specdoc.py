"""docs/slo-spec.md is generated from the spec models: fresh, complete, and rebuilt by the CLI."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel
from typer.testing import CliRunner

from lanewatch.alerts import spec_schema, specdoc
from lanewatch.collector.cli import app

STALE = "stale: run `lanewatch alerts docs` (or `make generate`) and commit the result"


def _all_models(root: type[BaseModel]) -> set[type[BaseModel]]:
    found: set[type[BaseModel]] = set()
    stack = [root]
    while stack:
        model = stack.pop()
        if model in found:
            continue
        found.add(model)
        for field in model.model_fields.values():
            stack.extend(specdoc._nested(field.annotation))
    return found


def test_committed_page_is_fresh() -> None:
    assert specdoc.DOCS_PAGE.exists(), f"{specdoc.DOCS_PAGE} missing: {STALE}"
    assert specdoc.DOCS_PAGE.read_text(encoding="utf-8") == specdoc.render(), f"{specdoc.DOCS_PAGE} {STALE}"


def test_every_field_of_every_model_is_documented_with_a_description() -> None:
    page = specdoc.render()
    models = _all_models(spec_schema.SpecDocumentModel) | _all_models(spec_schema.WindowsFileModel)
    assert len(models) > 20
    for model in models:
        for name, field in model.model_fields.items():
            key = field.alias or name
            assert field.description, f"{model.__name__}.{name} has no docstring"
            row = f"| `{key}` | "
            assert any(
                line.startswith(row) and field.description.replace("|", "\\|") in line
                for line in page.splitlines()
            ), f"{model.__name__}.{key} is not on the page"


def test_types_defaults_and_constraints_read_as_yaml_writes_them() -> None:
    page = specdoc.render()
    assert "| `objective` | number, > 0, < 100 | required |" in page
    assert '| `period` | string, duration (`30s`, `5m`, `1h`, `28d`) | `"28d"` |' in page
    assert '| `severity` | `page` \\| `ticket` | `"ticket"` |' in page
    assert '| `for` | string, duration, `0s` allowed | `"0s"` |' in page  # the alias, not `for_`


def test_every_link_on_the_page_lands_on_one_of_its_headings() -> None:
    page = specdoc.render()
    anchors = {specdoc.slug(h) for h in re.findall(r"^#+ (.+)$", page, flags=re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", page)
    assert links
    assert set(links) <= anchors, set(links) - anchors


def test_slug_is_githubs() -> None:
    assert specdoc.slug("`spec.slos[].latency`") == "specsloslatency"
    assert specdoc.slug("Admin API contract") == "admin-api-contract"
    assert specdoc.slug("Gateway (`lanewatch gateway`)") == "gateway-lanewatch-gateway"


def test_cli_writes_the_page_and_reports_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "slo-spec.md"
    first = CliRunner().invoke(app, ["alerts", "docs", "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "wrote" in first.output
    assert out.read_text(encoding="utf-8") == specdoc.DOCS_PAGE.read_text(encoding="utf-8")
    second = CliRunner().invoke(app, ["alerts", "docs", "--out", str(out)])
    assert second.exit_code == 0 and "unchanged" in second.output
