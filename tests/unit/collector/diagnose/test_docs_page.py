"""docs/diagnose.md lists every registered check and threshold as the code defines them."""

from __future__ import annotations

import pytest

from lanewatch.collector.diagnose import CHECKS, Thresholds
from lanewatch.collector.diagnose.docs import refresh
from lanewatch.collector.diagnose.evidence import flat_keys
from lanewatch.collector.diagnose.render import SCHEMA
from lanewatch.collector.diagnose.thresholds import CHOICE
from tests.layout import ROOT

PAGE = ROOT / "docs" / "diagnose.md"


def test_the_generated_tables_are_current() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert refresh(text) == text, "run: .venv/bin/python -m tests.unit.collector.diagnose.example"


def test_every_check_is_described_with_its_own_explanation_and_declarations() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for check in CHECKS:
        assert f"- **`{check.id}`**: {check.explanation.split()[0]}" in text, check.id
        row = next(line for line in text.splitlines() if line.startswith(f"| `{check.id}` |"))
        assert all(f"`{key}`" in row for key in (*flat_keys(check.needs), *check.reads, *check.explained_by))


def test_a_stale_generated_section_is_caught() -> None:
    text = PAGE.read_text(encoding="utf-8")
    first = CHECKS[0]
    stale = text.replace(f"| `{first.id}` | {first.title} |", f"| `{first.id}` | an old title |")
    assert stale != text and refresh(stale) == text


def test_every_threshold_and_the_schema_are_on_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert all(f"| `{name}` |" in text for name in Thresholds.model_fields if name not in CHOICE)
    assert all(f"`{name}`" in text for name in CHOICE)
    assert f"`{SCHEMA}`" in text and f'"schema": "{SCHEMA}"' in text


def test_refresh_refuses_a_page_without_its_sections() -> None:
    with pytest.raises(ValueError, match="checks"):
        refresh("no sections here")


def test_the_scenario_matrix_on_the_page_is_the_one_tested() -> None:
    from tests.integration.diagnose_matrix import matrix_table

    assert matrix_table() in PAGE.read_text(encoding="utf-8")


def test_the_scenario_matrix_covers_every_check_and_healthy_runs() -> None:
    from tests.integration.diagnose_matrix import PROMETHEUS_SCENARIOS, SCENARIOS, UNIT_ONLY

    covered = {sc.expected for sc in SCENARIOS.values()} | {
        sc.expected for sc in PROMETHEUS_SCENARIOS.values()
    }
    assert {c.id for c in CHECKS} <= covered | set(UNIT_ONLY)
    assert not covered & set(UNIT_ONLY)
    page = PAGE.read_text(encoding="utf-8")
    assert all(f"`{check}` is checked on built evidence only" in page for check in UNIT_ONLY)
    healthy = [name for name, sc in SCENARIOS.items() if sc.expected is None]
    assert {SCENARIOS[n].lane for n in healthy} == {"fast", "slow"}
    assert any(len(SCENARIOS[n].runs[0].probes) > 1 for n in healthy)  # under load, not only idle
