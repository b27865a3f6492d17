"""Each check's cases beside its check: `cases_<module>.py` holds the cases of the checks in
collector/diagnose/checks/<module>.py. A new check adds its cases there (or a new module for a
new check module); `CASES` gathers them all, and test_checks.py runs each case's three paths."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from tests.unit.collector.diagnose.checks.windows import Case

__all__ = ["CASES", "case_modules"]


def case_modules() -> dict[str, ModuleType]:
    """Each cases module by the check module it covers (`queue` for cases_queue.py)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("cases_"):
            found[info.name.removeprefix("cases_")] = importlib.import_module(f"{__name__}.{info.name}")
    return found


def _gather() -> dict[str, Case]:
    cases: dict[str, Case] = {}
    for module in case_modules().values():
        repeated = set(cases) & set(module.CASES)
        assert not repeated, f"{module.__name__} repeats the cases of {sorted(repeated)}"
        cases.update(module.CASES)
    return cases


CASES: dict[str, Case] = _gather()
