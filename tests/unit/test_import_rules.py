"""What may import what, checked on the source.

Data flows one way, source → record → analysis → exporter. collector/ has one room per idea:
`record` (the request record and its analysis), `probe`, `collect` (the collect service) and
`common` (small shared pieces); exporters, alerts and dashboards build on `record` and `common`
only. `exporters.names` is the conventions module every part may read; exporter implementations
are wired in only by each command's entry point (the collect service, the gateway's serve module),
the CLI and the demo; no room imports the CLI. The simulator's contract is vLLM's, so it imports
nothing of lanewatch; the degrade controller reaches routers over HTTP only.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.layout import ROOT, module_name

# All that exporters, alerts and dashboards may take from the collector (the diagnosis's thresholds
# are pure data: the generated rules and panels read the same definitions).
FROM_COLLECTOR = (
    "lanewatch.collector.record",
    "lanewatch.collector.common",
    "lanewatch.collector.diagnose.thresholds",
)
# Modules that may do I/O in an otherwise pure room: its edge.
DIAGNOSE_EDGE = ("collector/diagnose/prometheus.py", "collector/diagnose/gather.py")
IO_MODULES = ("httpx", "aiohttp", "socket", "urllib", "http", "subprocess", "asyncio", "requests")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(path: Path) -> Iterator[str]:
    """Absolute names of the lanewatch modules a file imports at run time."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    stack: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("lanewatch."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            if name.startswith("lanewatch."):
                # `from lanewatch.exporters import names` imports lanewatch.exporters.names
                yield from (f"{name}.{a.name}" for a in node.names)
        stack.extend(ast.iter_child_nodes(node))


def _files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _violations(folder: str, allowed: tuple[str, ...], exempt: tuple[str, ...] = ()) -> list[str]:
    out = []
    for path in _files(folder):
        rel = str(path.relative_to(ROOT))
        if rel.startswith(exempt):
            continue
        for name in _runtime_imports(path):
            if not any(name == a or name.startswith(f"{a}.") for a in allowed):
                out.append(f"{rel} imports {name}")
    return out


def test_the_checker_sees_imports() -> None:
    imports = set(_runtime_imports(ROOT / "collector" / "collect" / "service.py"))
    assert any(n.startswith("lanewatch.exporters.prometheus") for n in imports)


def test_simulator_imports_nothing_of_lanewatch() -> None:
    assert _violations("simulator", ("lanewatch.simulator",)) == []


@pytest.mark.parametrize("folder", ["alerts", "dashboards"])
def test_rules_and_dashboards_take_names_from_the_conventions_module(folder: str) -> None:
    allowed = (
        "lanewatch.alerts",
        "lanewatch.dashboards",
        "lanewatch.exporters.names",
        *FROM_COLLECTOR,
    )
    assert _violations(folder, allowed) == []


def test_collector_reads_only_names_from_exporters() -> None:
    allowed = ("lanewatch.collector", "lanewatch.exporters.names", "lanewatch.simulator")
    wiring = (
        "collector/cli/",
        "collector/demo/",
        "collector/collect/service.py",
        "collector/gateway/processes/serve.py",
    )
    assert _violations("collector", allowed, exempt=wiring) == []


def test_only_the_cli_starts_the_simulator() -> None:
    users = {
        str(p.relative_to(ROOT))
        for p in _files("collector")
        if any(n.startswith("lanewatch.simulator") for n in _runtime_imports(p))
    }
    assert users <= {"collector/cli/sim.py"}


def test_degrade_never_imports_the_gateway() -> None:
    bad = [
        f"{p.relative_to(ROOT)} imports {n}"
        for p in _files("collector/degrade")
        for n in _runtime_imports(p)
        if n.startswith("lanewatch.collector.gateway")
    ]
    assert bad == []


def test_exporters_read_records_and_analysis_only() -> None:
    # The report's Diagnosis section runs the pure diagnosis over its records; never its I/O edge.
    allowed = ("lanewatch.exporters", *FROM_COLLECTOR, "lanewatch.collector.diagnose")
    edge = tuple(module_name(ROOT / path) for path in DIAGNOSE_EDGE)
    assert _violations("exporters", allowed) == []
    users = [
        f"{p.relative_to(ROOT)} imports {n}"
        for p in _files("exporters")
        for n in _runtime_imports(p)
        if any(n == e or n.startswith(f"{e}.") for e in edge)
    ]
    assert users == []


def test_common_stands_alone() -> None:
    assert _violations("collector/common", ("lanewatch.collector.common",)) == []


def test_record_builds_on_common_only() -> None:
    # ServerSpan, the server half of a joined record, still lives beside its OTLP decoder.
    allowed = ("lanewatch.collector.record", "lanewatch.collector.common", "lanewatch.collector.collect.otlp")
    assert _violations("collector/record", allowed) == []


def test_diagnose_builds_on_record_common_and_names_only() -> None:
    allowed = (
        "lanewatch.collector.diagnose",
        "lanewatch.collector.record",
        "lanewatch.collector.common",
        "lanewatch.exporters.names",
    )
    assert _violations("collector/diagnose", allowed) == []


def _third_party_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_diagnosis_model_does_no_io() -> None:
    """Only the edge module queries Prometheus; the checks and the model are pure."""
    bad = [
        f"{p.relative_to(ROOT)} imports {name}"
        for p in _files("collector/diagnose")
        if str(p.relative_to(ROOT)) not in DIAGNOSE_EDGE
        for name in _third_party_imports(p)
        if name in IO_MODULES
    ]
    assert bad == []
    edge = ROOT / DIAGNOSE_EDGE[0]
    assert not edge.exists() or "httpx" in _third_party_imports(edge)  # the checker sees the edge's I/O


def test_only_the_cli_imports_the_cli() -> None:
    """Commands' wiring lives in their rooms; the CLI only parses flags and calls it."""
    users = [
        f"{p.relative_to(ROOT)} imports {n}"
        for folder in ("collector", "exporters", "alerts", "dashboards", "simulator")
        for p in _files(folder)
        if not str(p.relative_to(ROOT)).startswith("collector/cli/")
        for n in _runtime_imports(p)
        if n.startswith("lanewatch.collector.cli")
    ]
    assert users == []


def test_integrations_import_only_records_common_and_the_stdlib_or_their_host() -> None:
    """Code that runs inside another process (the LiteLLM proxy's venv) has none of lanewatch's deps."""
    allowed = ("lanewatch.integrations", "lanewatch.collector.record.timing", "lanewatch.collector.common")
    assert _violations("integrations", allowed) == []
    hosts = {"litellm", "lanewatch", "__future__"}
    bad = [
        f"{p.relative_to(ROOT)} imports {name}"
        for p in _files("integrations")
        for name in _third_party_imports(p)
        if name not in hosts and name not in sys.stdlib_module_names
    ]
    assert bad == []
