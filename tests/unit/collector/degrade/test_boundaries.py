from __future__ import annotations

import ast
from pathlib import Path

import lanewatch.collector.degrade as degrade


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_degrade_reaches_routers_only_over_http() -> None:
    sources = sorted(Path(degrade.__file__).parent.glob("*.py"))
    assert len(sources) >= 8
    for path in sources:
        lanewatch = {m for m in _imports(path) if m.startswith("lanewatch")}
        assert not any(m.startswith("lanewatch.collector.gateway") for m in lanewatch), path.name
        # besides itself, the package may use config (its settings) and exporters.names (metric names)
        assert lanewatch <= {"lanewatch.collector.config", "lanewatch.exporters"}, (path.name, lanewatch)
