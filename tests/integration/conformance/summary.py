"""The conformance suite's summary hooks (tests/conftest.py takes them): each router's rows and its gaps.

Each row's test reports its gaps as a property of its report, so the summary also holds
when the rows ran on xdist workers: the reports reach the controlling process.
"""

from __future__ import annotations

import pytest

from .rows import GAPS_PROPERTY, TALLY


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Take the gaps a passed row's test reported."""
    if report.when != "call" or not report.passed:
        return
    for name, value in report.user_properties:
        if name == GAPS_PROPERTY and isinstance(value, list | tuple):
            router, row, gaps, share = value
            TALLY.add(str(router), str(row), frozenset(gaps), float(share))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the gaps each router showed, once the session ends (nothing when no row ran)."""
    if TALLY.seen:
        terminalreporter.section("router conformance: declared gaps")
        for line in TALLY.lines():
            terminalreporter.write_line(line)
