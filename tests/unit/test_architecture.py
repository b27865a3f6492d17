"""docs/architecture.md names the rooms that exist, under the names they are imported by, and every room."""

from __future__ import annotations

import re

from tests.layout import ROOT, module_name

PAGE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `([^`]+/)` \| (?:`([^`]+)`|—) \|", flags=re.M)


# Rooms whose packages land with their own change (the adapters package and the diagnosis room):
# the page describes them already. Empty this once both are in the tree.
def rooms(text: str) -> dict[str, str | None]:
    """Folder -> import name (None for a folder that is not a package) of each row of the Rooms table."""
    return {folder: name or None for folder, name in ROW.findall(text)}


def test_rooms_are_read_from_the_table() -> None:
    text = (
        "| room | import name | holds |\n|---|---|---|\n| `a/b/` | `x.a.b` | things |\n| `d/` | — | files |\n"
    )
    assert rooms(text) == {"a/b/": "x.a.b", "d/": None}


def test_every_room_the_page_names_exists_under_its_import_name() -> None:
    named = rooms(PAGE.read_text(encoding="utf-8"))
    assert len(named) >= 15
    wrong = []
    for folder, name in named.items():
        path = ROOT / folder
        if not path.is_dir():
            wrong.append(f"{folder}: no such folder")
        elif name is not None and module_name(path / "__init__.py") != name:
            wrong.append(f"{folder}: not the package {name}")
    assert wrong == []


def test_every_room_in_the_tree_is_on_the_page() -> None:
    named = set(rooms(PAGE.read_text(encoding="utf-8")))
    collector = {f"collector/{p.parent.name}/" for p in (ROOT / "collector").glob("*/__init__.py")}
    top = {f"{p.parent.name}/" for p in ROOT.glob("*/__init__.py") if p.parent.name != "collector"}
    assert sorted((collector | top) - named) == []


def test_the_readme_links_the_page() -> None:
    assert "(docs/architecture.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_page_names_each_extension_point() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for path in ("collector/record/timing.py", "exporters/names.py", "collector/common/errors.py"):
        assert f"`{path}`" in text and (ROOT / path).is_file(), path
    for heading in ("Router adapters", "Diagnosis checks", "Exporters", "Alerts and dashboards generation"):
        assert f"### {heading}" in text, heading


MAX_MODULE_LINES = 600  # past this a module holds more than one idea: split it by idea


def test_no_module_is_over_six_hundred_lines() -> None:
    folders = ("collector", "exporters", "alerts", "dashboards", "simulator", "integrations")
    long = {
        str(p.relative_to(ROOT)): n
        for folder in folders
        for p in (ROOT / folder).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}
