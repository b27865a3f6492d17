"""docs/metrics.md's request-metrics table is the one the exporter's table renders."""

from __future__ import annotations

import pytest

from lanewatch.exporters.metrics_doc import COMMAND, DOCS_PAGE, SECTION, refresh


def test_the_committed_request_metrics_table_is_fresh() -> None:
    text = DOCS_PAGE.read_text(encoding="utf-8")
    assert refresh(text) == text, f"docs/metrics.md#{SECTION} is stale: run `{COMMAND}` and commit the result"


def test_a_hand_edit_inside_the_section_is_undone_and_outside_it_kept() -> None:
    text = DOCS_PAGE.read_text(encoding="utf-8")
    edited = text.replace(f"<!-- end: {SECTION} -->", f"| a hand-written row |\n<!-- end: {SECTION} -->", 1)
    edited = edited.replace("# Metrics\n", "# Metrics\n\nA hand-written line.\n", 1)
    assert refresh(edited) == text.replace("# Metrics\n", "# Metrics\n\nA hand-written line.\n", 1)


def test_a_page_without_the_section_is_refused() -> None:
    with pytest.raises(ValueError, match="no generated section"):
        refresh("# Metrics\n")
