"""Every generated section of docs/, in one registry: `make docs` rewrites them, a test checks them.

A section is a whole page, or the text between `<!-- generated: NAME -->` and `<!-- end: NAME -->`
on a page that is otherwise written by hand. `python -m tests.generated_docs` rewrites every
section (what `make docs` runs); tests/unit/test_docs_generated.py fails on a stale one, naming
the page and the command. A new generated section is one entry in `SECTIONS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from lanewatch.collector.diagnose.docs import SECTIONS as DIAGNOSE
from tests.layout import ROOT

__all__ = ["MAKE", "SECTIONS", "Section", "main"]

MAKE = "make docs"


@dataclass(frozen=True)
class Section:
    """One generated part of a docs page: where it is, how it is rendered, the command that rewrites it."""

    page: str  # relative to the repository root
    name: str | None  # the marker's name; None: the whole page is generated
    render: Callable[[], str]
    command: str  # the one command that regenerates this section alone

    @property
    def label(self) -> str:
        """`page` or `page#name`, as the test and the messages name the section."""
        return self.page if self.name is None else f"{self.page}#{self.name}"

    def body(self, text: str) -> str:
        """The section's committed text within the page `text`."""
        if self.name is None:
            return text
        found = self._pattern().search(text)
        if found is None:
            raise ValueError(f"{self.page} has no generated section {self.name!r}")
        return found.group(2)

    def refresh(self, text: str) -> str:
        """The page `text` with this section rendered afresh."""
        if self.name is None:
            return self.render()
        self.body(text)  # refuses a page whose markers are gone
        fresh = self.render().rstrip("\n")
        return self._pattern().sub(lambda m: m.group(1) + fresh + m.group(3), text, count=1)

    def _pattern(self) -> re.Pattern[str]:
        name = re.escape(self.name or "")
        return re.compile(rf"(<!-- generated: {name} -->\n)(.*?)(\n<!-- end: {name} -->)", flags=re.S)


def _adapters_table() -> str:
    from lanewatch.collector.degrade.adapters import REGISTRY

    return REGISTRY.table()


def _diagnose_example() -> str:
    """The worked example: the command and its own output (tests/unit/collector/diagnose/example.py)."""
    from tests.unit.collector.diagnose.example import COMMAND, output

    return "```text\n" + COMMAND + output().rstrip("\n") + "\n```"


def _diagnose_matrix() -> str:
    from tests.integration.diagnose_matrix import matrix_table

    return matrix_table()


def _slo_spec() -> str:
    from lanewatch.alerts import specdoc

    return specdoc.render()


def _request_metrics() -> str:
    from lanewatch.exporters.metrics_doc import request_metrics_table

    return request_metrics_table()


def _conformance() -> str:
    from tests.integration.conformance.doc import declarations, render

    return render(declarations())


DIAGNOSE_TABLES = "python -m lanewatch.collector.diagnose.docs docs/diagnose.md"

SECTIONS: tuple[Section, ...] = (
    Section("docs/degrade.md", "adapters", _adapters_table, "lanewatch degrade adapters --markdown"),
    # the diagnosis tables, each of lanewatch.collector.diagnose.docs' registry
    *(Section("docs/diagnose.md", name, render, DIAGNOSE_TABLES) for name, render in DIAGNOSE.items()),
    Section(
        "docs/diagnose.md", "example", _diagnose_example, "python -m tests.unit.collector.diagnose.example"
    ),
    Section("docs/diagnose.md", "scenarios", _diagnose_matrix, MAKE),
    Section("docs/slo-spec.md", None, _slo_spec, "lanewatch alerts docs"),
    Section("docs/routers/conformance.md", None, _conformance, "python -m tests.integration.conformance.doc"),
    Section(
        "docs/metrics.md", "request-metrics", _request_metrics, "python -m lanewatch.exporters.metrics_doc"
    ),
)


def main() -> None:
    """Rewrite every section of `SECTIONS` in place; print the pages that changed."""
    for page in dict.fromkeys(s.page for s in SECTIONS):
        path = ROOT / page
        before = path.read_text(encoding="utf-8")
        text = before
        for section in (s for s in SECTIONS if s.page == page):
            text = section.refresh(text)
        if text != before:
            path.write_text(text, encoding="utf-8")
            print(f"rewrote {page}")


if __name__ == "__main__":
    main()
