"""Every generated docs section (tests/generated_docs.py) is what its generator renders now."""

from __future__ import annotations

import re

import pytest

from tests.generated_docs import MAKE, SECTIONS, Section
from tests.layout import ROOT


def _page(section: Section) -> str:
    return (ROOT / section.page).read_text(encoding="utf-8")


@pytest.mark.parametrize("section", SECTIONS, ids=[s.label for s in SECTIONS])
def test_the_committed_section_is_the_generated_one(section: Section) -> None:
    text = _page(section)
    alone = "" if section.command == MAKE else f" (or `{section.command}`)"
    assert section.body(text) == section.body(section.refresh(text)), (
        f"{section.label} is stale: run `make docs`{alone} and commit the result"
    )


@pytest.mark.parametrize("section", SECTIONS, ids=[s.label for s in SECTIONS])
def test_a_hand_edit_inside_the_section_is_undone(section: Section) -> None:
    text = _page(section)
    body = section.body(text)
    edited = text.replace(body, body + "\n| a hand-written row |", 1)
    assert section.body(edited) != body
    assert section.refresh(edited) == text


def test_a_page_that_lost_its_markers_is_refused() -> None:
    marked = next(s for s in SECTIONS if s.name is not None)
    with pytest.raises(ValueError, match=f"{marked.page} has no generated section"):
        marked.refresh("no markers here\n")


def test_every_page_with_markers_has_each_of_them_in_the_registry() -> None:
    named = {(s.page, s.name) for s in SECTIONS}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        page = path.relative_to(ROOT).as_posix()
        for name in re.findall(r"^<!-- generated: (\S+) -->$", path.read_text(encoding="utf-8"), re.M):
            assert (page, name) in named, f"{page}#{name} is marked generated; add it to SECTIONS"
