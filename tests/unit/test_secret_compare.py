"""Secrets are compared in constant time: no `==`, `!=` or `in` on a token, key or signature.

A timing difference in `==` tells an attacker how much of a guessed token was right. Every
place that checks a bearer token or key (gateway admin, degrade webhook, simulator admin and
API key) must use `hmac.compare_digest`; this scans the source for comparisons that name a
secret, beside the behaviour tests of each API (401 for a wrong or missing token).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("collector", "exporters", "simulator", "alerts", "dashboards")
# Identifiers that hold a secret (`token`, not `tokens`: those are LLM tokens).
SECRET = re.compile(r"token(?!s)|secret|api_?key|passw|signature|credential|authoriz", re.IGNORECASE)
TIMING_UNSAFE = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
# Where a token is compared; the collector's APIs share collector/common/secrets.py (the simulator
# imports nothing of lanewatch, so it keeps its own). The collector's ingest paths (records,
# progress, OTLP) ask credentials.py, which checks every configured token with it.
AUTH_SITES = ("collector/common/secrets.py", "simulator/app.py")
BEARER_USERS = (
    "collector/gateway/front/admin.py",
    "collector/degrade/server.py",
    "collector/collect/credentials.py",
)
INGEST_EDGES = (
    "collector/collect/records_http.py",
    "collector/collect/progress_http.py",
    "collector/collect/otlp_http.py",
    "collector/collect/otlp_grpc.py",
)


def _identifiers(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            out.append(n.id)
        elif isinstance(n, ast.Attribute):
            out.append(n.attr)
        elif isinstance(n, ast.arg):
            out.append(n.arg)
    return out


def unsafe_compares(source: str) -> list[str]:
    """Comparisons with ==, !=, in or not in where an operand names a secret."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, TIMING_UNSAFE) for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        if any(SECRET.search(name) for side in operands for name in _identifiers(side)):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_catches_what_it_looks_for() -> None:
    bad = "if given == token: pass\nok = header != f'Bearer {api_key}'\nx = sig in signatures\n"
    assert len(unsafe_compares(bad)) == 3
    fine = "ok = hmac.compare_digest(given, token)\nn = output_tokens == 0\nif token is None: pass\n"
    assert unsafe_compares(fine) == []


SOURCES = sorted(str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES)
def test_no_secret_is_compared_with_equality(path: str) -> None:
    assert unsafe_compares((ROOT / path).read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("site", AUTH_SITES)
def test_every_auth_check_uses_compare_digest(site: str) -> None:
    assert "hmac.compare_digest(" in (ROOT / site).read_text(encoding="utf-8")


@pytest.mark.parametrize("site", BEARER_USERS)
def test_every_collector_api_checks_its_token_with_bearer_ok(site: str) -> None:
    assert "bearer_ok(" in (ROOT / site).read_text(encoding="utf-8")


@pytest.mark.parametrize("site", INGEST_EDGES)
def test_every_ingest_edge_asks_the_credentials(site: str) -> None:
    assert "as_auth(" in (ROOT / site).read_text(encoding="utf-8")
