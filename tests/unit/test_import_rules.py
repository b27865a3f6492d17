"""What may import what, checked on the source.

Data flows one way, source → record → analysis → exporter. collector/ has one room per idea:
`record` (the request record and its analysis), `probe`, `collect` (the collect service) and
`common` (small shared pieces); exporters, alerts and dashboards build on `record` and `common`
only. `exporters.names` is the conventions module every part may read; exporter implementations
are wired in only by each command's entry point (the collect service, the gateway's serve module),
the CLI and the demo; no room imports the CLI. The simulator's contract is vLLM's, so it imports
nothing of lanewatch; the degrade controller reaches routers over HTTP only.

The gateway's rooms follow its request path (front → admission → upstream → tap → ship, as its face
lists the stages): a room imports only the rooms before it. And no circle of imports joins two rooms.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.collector.demo.litellm import HANDLER_NEEDS
from tests.gateway_path import GATEWAY, face_text
from tests.gateway_path import rooms as path_rooms
from tests.layout import ROOT, module_name, package_dirs
from tests.unit.test_architecture import PAGE
from tests.unit.test_architecture import rooms as page_rooms

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
    return _imports(path, type_only=False)


def _type_only_imports(path: Path) -> Iterator[str]:
    """Absolute names a file imports under `if TYPE_CHECKING:` (for the type checker, never run)."""
    return _imports(path, type_only=True)


def _imports(path: Path, type_only: bool) -> Iterator[str]:
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    stack: list[tuple[ast.AST, bool]] = [(ast.parse(path.read_text(encoding="utf-8")), False)]
    while stack:
        node, typing_block = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend((child, True) for child in node.body)
            stack.extend((child, typing_block) for child in node.orelse)
            continue
        if typing_block == type_only:
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
        stack.extend((child, typing_block) for child in ast.iter_child_nodes(node))


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
        "collector/guard/spec.py",  # the guard's alerts from the SLO spec's mitigation rules
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
    # The report (its own subpackage) runs the pure diagnosis over its records for its Diagnosis
    # section, never its I/O edge; the metric exporters read records and evidence alone.
    allowed = ("lanewatch.exporters", *FROM_COLLECTOR)
    edge = tuple(module_name(ROOT / path) for path in DIAGNOSE_EDGE)
    assert _violations("exporters", allowed, exempt=("exporters/report/",)) == []
    assert _violations("exporters/report", (*allowed, "lanewatch.collector.diagnose")) == []
    users = [
        f"{p.relative_to(ROOT)} imports {n}"
        for p in _files("exporters")
        for n in _runtime_imports(p)
        if any(n == e or n.startswith(f"{e}.") for e in edge)
    ]
    assert users == []


def test_common_stands_alone() -> None:
    assert _violations("collector/common", ("lanewatch.collector.common",)) == []


def test_record_builds_on_common_and_the_openai_readers_only() -> None:
    allowed = (
        "lanewatch.collector.record",
        "lanewatch.collector.common",
        "lanewatch.collector.openai_api",  # the builder reads the answer's usage and metrics
    )
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
    """Code that runs inside another process (the LiteLLM proxy's venv) has none of lanewatch's deps
    but HANDLER_NEEDS (the docs' set-up installs them there), in anything it imports, at any depth."""
    allowed = (
        "lanewatch.integrations",
        "lanewatch.collector.record.timing",
        "lanewatch.collector.record.builder",
        "lanewatch.collector.record.shipping",
        "lanewatch.collector.common",
        "lanewatch.collector.classify.rules",
        "lanewatch.collector.degrade_state.state",
        "lanewatch.collector.openai_api",
        "lanewatch.collector.progress",
    )
    assert _violations("integrations", allowed) == []
    needs = {need.split(">", 1)[0].split("=", 1)[0] for need in HANDLER_NEEDS}
    # LiteLLM's own dependencies the handler leans on: pydantic (the class rules' settings) and
    # aiohttp (the progress reporter, collector/progress/report.py).
    hosts = {"litellm", "pydantic", "aiohttp", "lanewatch", "__future__", *needs}
    bad = [
        f"{p.relative_to(ROOT)} imports {name}"
        for p in _reached_from("integrations")
        for name in _third_party_imports(p)
        if name not in hosts and name not in sys.stdlib_module_names
    ]
    assert bad == []


def _module_file(name: str) -> Path | None:
    """The source file of a lanewatch module, or of the module `name` is an attribute of."""
    parts = name.split(".")
    roots = package_dirs()
    for end in range(len(parts), 1, -1):
        top = ".".join(parts[:2])
        if top not in roots:
            return None
        base = ROOT / roots[top] / Path(*parts[2:end]) if end > 2 else ROOT / roots[top]
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if end > 2 and candidate.is_file():
                return candidate
        if end == 2 and (base / "__init__.py").is_file():
            return base / "__init__.py"
    return None


def _reached_from(folder: str) -> list[Path]:
    """Every lanewatch source file the folder's files import at run time, at any depth (and theirs)."""
    seen: set[Path] = set()
    todo = _files(folder)
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _runtime_imports(path):
            found = _module_file(name)
            if found is not None and found not in seen:
                todo.append(found)
    return sorted(seen)


def test_the_proxys_reach_is_followed_through_the_shipping_core() -> None:
    reached = {str(p.relative_to(ROOT)) for p in _reached_from("integrations")}
    assert {"collector/record/shipping.py", "collector/record/codec.py"} <= reached
    assert "msgspec" in _third_party_imports(ROOT / "collector" / "record" / "codec.py")


# The gateway's rooms along the request path, in the order a request reaches them (read from the
# face's list of stages: front, admission, upstream, tap, ship). Why only backwards: a stage is
# handed the request by the wiring (request_path.py) and returns, so it needs the types of what came
# before it (a Request, a routing decision, an Upstream) and never the code of what comes after;
# each room can then be read, and tested, with only the rooms before it.
# What the code needs besides: every handler takes the gateway's state (state.py, which builds
# every room, so it sits above them all), and the forward stage fills in the exchange and feeds the
# stream scan it is handed (both the tap's). Those it names for the type checker only, under
# `if TYPE_CHECKING:`: a type-only import may name the state and the *next* room, never further,
# and nothing of them runs. The top of the package (the face, request_path.py, server.py,
# state.py, stats.py) composes the rooms; processes/ runs it all, and nothing imports processes/.
GATEWAY_PKG = "lanewatch.collector.gateway"
PROCESSES = "processes"


@functools.cache
def _module_files() -> dict[str, Path]:
    """Every lanewatch module's import name -> its file."""
    out = {}
    for folder in package_dirs().values():
        for path in (ROOT / folder).rglob("*.py"):
            out[module_name(path)] = path
    return out


def _module_of(name: str, modules: dict[str, Path]) -> str | None:
    """The module an imported name lives in: `pkg.mod.Class` -> `pkg.mod`; None outside lanewatch."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _gateway_room(module: str) -> str | None:
    """The gateway sub-package a module lives in ("front"), "" for the package's top, None elsewhere
    (and for the gateway's settings, which every stage reads, as every room reads `common`)."""
    if module != GATEWAY_PKG and not module.startswith(f"{GATEWAY_PKG}."):
        return None
    if module == f"{GATEWAY_PKG}.settings" or module.startswith(f"{GATEWAY_PKG}.settings."):
        return None
    rest = module.removeprefix(GATEWAY_PKG).lstrip(".").split(".")
    return rest[0] if len(rest) > 1 else ""


def _gateway_edges(type_only: bool) -> list[tuple[str, str, str]]:
    """(importing file, its room, the imported module's room) for each import within the gateway."""
    modules = _module_files()
    out = []
    for path in sorted(GATEWAY.rglob("*.py")):
        room = _gateway_room(module_name(path))
        if room is None:  # the settings, which every stage reads: they import none
            assert not [n for n in _runtime_imports(path) if n.startswith(f"{GATEWAY_PKG}.")], path
            continue
        for name in (_type_only_imports if type_only else _runtime_imports)(path):
            target = _module_of(name, modules)
            target_room = _gateway_room(target) if target is not None else None
            if target_room is not None:
                out.append((str(path.relative_to(ROOT)), room, target_room))
    return out


def _path_order() -> dict[str, int]:
    return {room: i for i, room in enumerate(path_rooms(face_text()))}


def test_the_gateway_rooms_are_read_from_the_face() -> None:
    assert list(_path_order()) == ["front", "admission", "upstream", "tap", "ship"]
    assert _gateway_room(f"{GATEWAY_PKG}.tap.record") == "tap"
    assert _gateway_room(f"{GATEWAY_PKG}.state") == ""
    assert _gateway_room("lanewatch.collector.config") is None
    assert _gateway_room(f"{GATEWAY_PKG}.settings.GatewayConfig") is None


def test_the_checker_sees_the_gateway_imports() -> None:
    runtime = _gateway_edges(type_only=False)
    typed = _gateway_edges(type_only=True)
    assert ("collector/gateway/tap/record.py", "tap", "front") in runtime
    assert ("collector/gateway/upstream/forward.py", "upstream", "tap") in typed
    assert ("collector/gateway/upstream/forward.py", "upstream", "tap") not in runtime


def test_gateway_rooms_import_only_the_rooms_before_them() -> None:
    order = _path_order()
    bad = [
        f"{file} ({room}) imports {target or 'the gateway top'} at run time"
        for file, room, target in _gateway_edges(type_only=False)
        if room in order and (target not in order or order[target] > order[room])
    ]
    assert bad == []


def test_gateway_rooms_name_only_the_next_room_and_never_the_top_for_the_type_checker() -> None:
    """A stage says what it reads of the gateway as a narrow protocol of its own (admit.py's
    `Admitting`, forward.py's `Forwarding`, ...), so no stage names the gateway's state, its stats
    or any module of the top, even for the type checker: the hub imports the stages, never back."""
    order = _path_order()
    modules = _module_files()
    bad = []
    for path in sorted(GATEWAY.rglob("*.py")):
        room = _gateway_room(module_name(path))
        if room not in order:
            continue
        for name in _type_only_imports(path):
            target = _module_of(name, modules)
            target_room = _gateway_room(target) if target is not None else None
            if target_room is None:
                continue
            if target_room not in order or order[target_room] > order[room] + 1:
                bad.append(f"{path.relative_to(ROOT)} ({room}) names {target}")
    assert bad == []


def test_nothing_imports_the_gateway_processes_but_themselves_and_the_cli() -> None:
    modules = _module_files()
    bad = [
        f"{path.relative_to(ROOT)} imports {name}"
        for module, path in modules.items()
        if _gateway_room(module) != PROCESSES and not module.startswith("lanewatch.collector.cli")
        for name in _runtime_imports(path)
        if (target := _module_of(name, modules)) is not None and _gateway_room(target) == PROCESSES
    ]
    assert bad == []


def _room_of(path: Path, rooms: list[str]) -> str:
    """The room a file is in: the longest room folder that holds it, else the file itself."""
    rel = str(path.relative_to(ROOT))
    return max((r for r in rooms if rel.startswith(r)), key=len, default=rel)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one node (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_cycle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_joins_two_rooms() -> None:
    """Modules may import each other in a circle inside one room (a lazy import back, say), never
    across rooms, counting the type checker's imports too: the rooms are the architecture page's
    table, the gateway's sub-rooms among them."""
    rooms = list(page_rooms(PAGE.read_text(encoding="utf-8")))
    modules = _module_files()
    edges: dict[str, set[str]] = {}
    for module, path in modules.items():
        names = [*_runtime_imports(path), *_type_only_imports(path)]
        targets = {_module_of(name, modules) for name in names}
        edges[module] = {t for t in targets if t is not None and t != module}
    across = [
        " -> ".join(cycle)
        for cycle in _cycles(edges)
        if len({_room_of(modules[m], rooms) for m in cycle}) > 1
    ]
    assert across == []


# Rooms whose models are contracts several processes share, so their models are the settings:
# the class rules (the gateway's and the LiteLLM handler's) and a lane's served models (the
# gateway's lanes and the Envoy adapter's), beside the true utilities of `common`.
SHARED_MODELS = frozenset({"common", "classify", "degrade_state"})


def test_config_only_composes_the_rooms_settings() -> None:
    """collector/config.py takes another room's settings from its `settings` module, never its
    internals (an adapter registry, a thresholds table): each room owns its settings."""
    rooms = {p.parent.name for p in (ROOT / "collector").glob("*/__init__.py")}
    bad = []
    for name in _runtime_imports(ROOT / "collector" / "config.py"):
        parts = name.split(".")
        if len(parts) > 2 and parts[:2] == ["lanewatch", "collector"] and parts[2] in rooms:
            room = parts[2]
            if room not in SHARED_MODELS and (len(parts) < 4 or parts[3] != "settings"):
                bad.append(name)
    assert bad == []
    assert any(
        n.startswith("lanewatch.collector.degrade.settings")
        for n in _runtime_imports(ROOT / "collector" / "config.py")
    )


def test_common_holds_eight_modules_at_most() -> None:
    """`common/` is for true utilities: an idea with more than one module gets a room of its own."""
    modules = sorted(p.stem for p in (ROOT / "collector" / "common").glob("*.py") if p.stem != "__init__")
    assert len(modules) <= 8, modules


def test_only_the_cli_and_the_collect_commands_wiring_import_the_composed_config() -> None:
    """Each room takes its own settings; the composed config is read by the CLI and by the collect
    service, whose inputs span every section (targets, probe, scrape, OTLP, ingest, guard)."""
    wiring = (
        "collector/cli/",
        "collector/collect/service.py",
        "collector/collect/serve.py",
        "collector/config.py",
    )
    users = [
        str(p.relative_to(ROOT))
        for folder in ("collector", "exporters", "integrations", "alerts", "dashboards")
        for p in _files(folder)
        if not str(p.relative_to(ROOT)).startswith(wiring)
        and any(
            n == "lanewatch.collector.config" or n.startswith("lanewatch.collector.config.")
            for n in _runtime_imports(p)
        )
    ]
    assert users == []
