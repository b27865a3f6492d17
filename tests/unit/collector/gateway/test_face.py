"""The gateway's face lists the request path: each stage names a module and function that exist, in
rooms that follow the path. tests/integration/test_gateway_path.py drives a request through them."""

from __future__ import annotations

import pytest

from tests.gateway_path import GATEWAY, Stage, arrow_line, face_text, rooms, stages

PATH = ("accept", "parse", "admit", "forward", "tap", "record", "ship")


def test_the_parser_reads_stages_and_their_order() -> None:
    text = (
        "One request's path, in order: a → b.\n\n"
        "1. a: `x/one.py` `One.run` does a.\n"
        "2. b: `y/two.py` `two` does b.\n"
    )
    assert arrow_line(text) == ["a", "b"]
    assert stages(text) == [Stage("a", "x/one.py", "One.run"), Stage("b", "y/two.py", "two")]
    assert rooms(text) == ["x", "y"]
    with pytest.raises(AssertionError):
        stages(text.replace("2. b", "3. b"))  # a gap in the numbering


def test_the_face_states_the_path_as_the_gateway_defines_it() -> None:
    text = face_text()
    assert arrow_line(text) == list(PATH)
    assert [s.name for s in stages(text)] == list(PATH)  # the numbered list follows the one-line path


def test_each_stage_names_a_module_and_function_that_exist() -> None:
    missing = []
    for stage in stages(face_text()):
        if not (GATEWAY / stage.file).is_file():
            missing.append(f"{stage.name}: no {stage.file}")
            continue
        try:
            stage.resolve()
        except AttributeError:
            missing.append(f"{stage.name}: {stage.file} has no {stage.function}")
    assert missing == []


def test_a_stage_that_names_a_gone_function_fails_to_resolve() -> None:
    stage = stages(face_text())[0]
    with pytest.raises(AttributeError):
        Stage(stage.name, stage.file, stage.function + "_gone").resolve()


def test_each_room_is_one_stretch_of_the_path() -> None:
    """A room holds consecutive stages: the request never comes back to a room it left."""
    order = [s.room for s in stages(face_text())]
    stretches = [room for i, room in enumerate(order) if i == 0 or order[i - 1] != room]
    assert stretches == rooms(face_text())
    assert len(stretches) == len(set(stretches))


def test_every_sub_package_is_a_room_of_the_path_or_the_processes() -> None:
    packages = sorted(p.parent.name for p in GATEWAY.glob("*/__init__.py"))
    assert packages == sorted([*rooms(face_text()), "processes"])
