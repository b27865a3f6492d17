"""The gateway's request path as its face (collector/gateway/__init__.py) lists it: the stages in order,
each with its module and function. The path test and the import rules read it from here."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.layout import ROOT, module_name

GATEWAY = ROOT / "collector" / "gateway"
# "1. accept: `front/listener.py` `FrontServer.accept` takes ..."
_STAGE = re.compile(r"^(\d+)\. (\w+): `([\w/]+\.py)` `([\w.]+)`", flags=re.M)
_ARROWS = re.compile(r"^One request's path, in order: (\w+(?: → \w+)+)\.$", flags=re.M)


@dataclass(frozen=True)
class Stage:
    """One stage of the path: its name, its module's file (under collector/gateway/) and function."""

    name: str
    file: str  # "front/listener.py"
    function: str  # "FrontServer.accept": a function or a class's method

    @property
    def room(self) -> str:
        """The sub-package the stage's module lives in ("front")."""
        return self.file.split("/")[0]

    def resolve(self) -> Callable[..., Any]:
        """The stage's function, imported from its module."""
        module = importlib.import_module(module_name(GATEWAY / self.file))
        obj: Any = module
        for part in self.function.split("."):
            obj = getattr(obj, part)
        assert inspect.isfunction(obj), f"{self.file} {self.function} is not a function"
        return obj


def face_text() -> str:
    """The face's docstring."""
    doc = importlib.import_module("lanewatch.collector.gateway").__doc__
    assert doc is not None
    return doc


def arrow_line(text: str) -> list[str]:
    """The stage names of the face's one-line path ("accept → parse → ..."), in order."""
    found = _ARROWS.findall(text)
    assert len(found) == 1, "the face states its path once, as 'One request's path, in order: a → b.'"
    return str(found[0]).split(" → ")


def stages(text: str) -> list[Stage]:
    """The face's numbered list of stages, in order (numbered 1, 2, ... without a gap)."""
    found = _STAGE.findall(text)
    assert [int(n) for n, *_ in found] == list(range(1, len(found) + 1)), "the stages are numbered 1, 2, ..."
    return [Stage(name, file, function) for _n, name, file, function in found]


def rooms(text: str) -> list[str]:
    """The path's rooms in the order a request reaches them."""
    out: list[str] = []
    for stage in stages(text):
        if stage.room not in out:
            out.append(stage.room)
    return out
