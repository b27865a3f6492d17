"""The README stays a front page, docs links resolve, and no text points outside the repository."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from lanewatch.alerts.specdoc import slug
from lanewatch.exporters import names

ROOT = Path(__file__).resolve().parents[2]
README_LIMIT = 14_000
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")  # inline code: a regex in it can look like a link
# Pointers that mean nothing to a reader of this repository alone: design notes and contracts
# kept elsewhere, a folder shared outside it, a tracker's numbers. Spelled in parts so this file
# does not match itself.
OUTSIDE = re.compile(
    "|".join(["CONTRACTS" + r"\.md", "DESIGN" + r"\.md", "shared" + "/", "issue" + r" #?[0-9]"])
)
SCANNED = ["collector", "exporters", "alerts", "dashboards", "simulator", "docs", "tests", "bench", "deploy"]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".json", ".toml", ".txt", ".cfg", ""}


def _links(page: Path) -> Iterator[str]:
    text = CODE.sub("code", FENCE.sub("", page.read_text(encoding="utf-8")))
    for target in LINK.findall(text):
        if not re.match(r"^[a-z]+:", target):  # http:, https:, mailto: are not checked here
            yield target


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.M)}


def test_readme_is_a_front_page() -> None:
    size = (ROOT / "README.md").stat().st_size
    assert size < README_LIMIT, f"README.md is {size} bytes; move detail into docs/ (limit {README_LIMIT})"


def test_the_readmes_diagram_names_every_adapter_kind() -> None:
    from lanewatch.collector.degrade.adapters import REGISTRY

    (line,) = [ln for ln in (ROOT / "README.md").read_text().splitlines() if "── adapters ──►" in ln]
    missing = [kind for kind in REGISTRY.kinds() if kind not in line.lower()]
    assert missing == [], f"the README's diagram misses {missing}"


def test_docs_pages_exist() -> None:
    found = {p.name for p in PAGES}
    expected = {"metrics.md", "gateway.md", "degrade.md", "slo-spec.md", "runbooks.md", "deploy.md"}
    assert expected | {"reliability.md", "simulator.md"} <= found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_and_heading(page: Path) -> None:
    broken = []
    for target in _links(page):
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def test_link_checker_catches_a_broken_file_and_anchor(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## Some `code` part\n")
    page.write_text(
        "[ok](b.md#some-code-part) [bad](c.md)\n```\n[in code](x.md)\n```\n`[a](b)` [web](https://x.org)\n"
    )
    assert list(_links(page)) == ["b.md#some-code-part", "c.md"]
    assert _anchors(tmp_path / "b.md") == {"title", "some-code-part"}


def _source_files() -> Iterator[Path]:
    for folder in SCANNED:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                yield path
    yield from (ROOT / name for name in ("README.md", "Makefile", "pyproject.toml"))


def test_no_text_points_outside_the_repository() -> None:
    hits = []
    for path in _source_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert not hits, "state the fact instead of pointing elsewhere:\n" + "\n".join(hits)


def test_outside_pattern_matches_what_it_should() -> None:
    bad_lines = ["see CONTRACTS" + ".md", "../shar" + "ed/ref", "issue" + " 7", "DESIGN" + ".md, Phases"]
    for bad in bad_lines:
        assert OUTSIDE.search(bad), bad
    for good in ["the issuer_name", "shared cores", "an issue with TLS"]:
        assert not OUTSIDE.search(good), good


def test_metrics_page_names_every_metric_in_names_py() -> None:
    page = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    metric_names = {
        v for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and v.startswith("lanewatch_")
    }
    assert len(metric_names) > 50
    missing = sorted(m for m in metric_names if f"`{m}`" not in page)
    assert not missing, f"docs/metrics.md does not document {missing}"


def test_admin_api_contract_names_what_the_gateway_checks() -> None:
    from lanewatch.collector.common.validation import CLASS_NAME_PATTERN
    from lanewatch.collector.degrade_state import wire as degrade_wire
    from lanewatch.collector.gateway.front import admin

    page = (ROOT / "docs" / "gateway.md").read_text(encoding="utf-8")
    contract = page[page.index("## Admin API contract") :]
    assert f"{admin.MAX_ADMIN_BODY // 1024} KiB" in contract
    for key in sorted(degrade_wire.LANE_KEYS):
        assert f"`lanes.<L>.{key}`" in contract, key
    for key in sorted(degrade_wire.READ_ONLY_KEYS):
        assert f"| `{key}` |" in contract, key
    assert CLASS_NAME_PATTERN in contract
    for status in ("400", "401", "403", "405", "413"):
        assert f"| {status} |" in contract, status
