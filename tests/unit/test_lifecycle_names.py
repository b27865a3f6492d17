"""One lifecycle vocabulary: long-lived parts start with `start()` and end with `shutdown()`.

Servers, receivers, services, shippers, samplers, schedulers, suites, stacks, supervisors and
runners are long-lived: each one that can be ended is ended by `shutdown()`, never by `stop`,
`stop_all` or `close` (those stay for plain resources: files, sockets, HTTP clients, stores).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("collector", "simulator", "exporters")
LONG_LIVED = re.compile(r"(Server|Receiver|Service|Shipper|Sampler|Scheduler|Suite|Stack|Supervisor|Runner)$")
OTHER_ENDINGS = frozenset({"stop", "stop_all", "close", "aclose"})


def outliers(source: str) -> list[str]:
    """`Class.method` for each long-lived class that ends with another word than shutdown."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and LONG_LIVED.search(node.name):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name in OTHER_ENDINGS:
                    found.append(f"{node.name}.{item.name}")
    return found


def test_the_scan_finds_an_outlier() -> None:
    src = "class GpuSampler:\n    def close(self): ...\nclass Parser:\n    def close(self): ...\n"
    assert outliers(src) == ["GpuSampler.close"]
    assert outliers("class FooServer:\n    async def shutdown(self): ...\n") == []


def test_long_lived_parts_end_with_shutdown() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in outliers(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_scan_sees_the_long_lived_parts() -> None:
    names = {
        node.name
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and LONG_LIVED.search(node.name)
    }
    assert {"GatewayServer", "FrontServer", "RecordShipper", "GpuSampler", "EngineRunner", "Stack"} <= names
