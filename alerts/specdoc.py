"""docs/slo-spec.md from the spec's pydantic models: every field with its type, default and meaning.

The models in spec_schema.py are the one definition of the spec format; this renders them, so the
reference page cannot drift from what `lanewatch alerts check` accepts. Pure: `render()`
returns the page, the CLI writes it, and a test compares it with the committed file.
"""

from __future__ import annotations

import json
import re
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from lanewatch.collector.common.validation import LANE_NAME_PATTERN

from . import spec_schema

# docs/slo-spec.md of a source checkout; absent from an installed wheel.
DOCS_PAGE: Final = Path(__file__).resolve().parent.parent / "docs" / "slo-spec.md"

# What the spec's own validators check, by function name.
_VALIDATED: Final = {
    "_duration": "duration (`30s`, `5m`, `1h`, `28d`)",
    "_for": "duration, `0s` allowed",
    "_regex": "regular expression",
    "check_lane_name": f"matches `{LANE_NAME_PATTERN}` (the lane-name rule config and gateway share)",
}
# Constraint objects pydantic keeps in a field's metadata, read by attribute.
_BOUNDS: Final = (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))

HEADER: Final = """# The SLO spec, field by field

Generated from the pydantic models in `alerts/spec_schema.py` by `lanewatch alerts docs` (run by
`make generate`); do not edit. A test fails when this page is stale.

A spec is one YAML document, `apiVersion: lanewatch/v1`, `kind: SLOSpec`; `alerts/slos.yaml`
is the default and [slo.md](slo.md#slos-as-code-lanewatch-alerts-lanewatch-dashboards) walks
through an example. Keys are camelCase. An unknown key is an error, and every error is reported
at once with its field path and line. `lanewatch alerts check --spec FILE` validates one.
`spec.windows` names a set of `alerts/windows.yaml` (`standard`, `demo`; its format is the last
section) or gives one inline.
"""


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _title(path: str) -> str:
    return f"`{path}`"


Paths = dict[type[BaseModel], list[str]]


def _models(root: type[BaseModel], path: str, seen: Paths) -> Iterator[type[BaseModel]]:
    """Every model under `root`, depth first in field order; `seen` gets every path of each."""
    if root in seen:
        seen[root].append(path)
        return
    seen[root] = [path]
    yield root
    for name, field in root.model_fields.items():
        key = field.alias or name
        for sub in _nested(field.annotation):
            suffix = "[]" if _is_list(field.annotation) else ".*" if _is_dict(field.annotation) else ""
            yield from _models(sub, (f"{path}.{key}" if path else key) + suffix, seen)


def _nested(tp: Any) -> Iterator[type[BaseModel]]:
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        yield tp
        return
    for arg in get_args(tp):
        yield from _nested(arg)


def _is_list(tp: Any) -> bool:
    return get_origin(tp) is list or any(get_origin(a) is list for a in get_args(tp))


def _is_dict(tp: Any) -> bool:
    return get_origin(tp) is dict or any(get_origin(a) is dict for a in get_args(tp))


def _constraints(metadata: list[Any]) -> list[str]:
    out: list[str] = []
    for item in metadata:
        for attr, sign in _BOUNDS:
            if getattr(item, attr, None) is not None:
                out.append(f"{sign} {getattr(item, attr):g}")
        if getattr(item, "min_length", None) is not None:
            out.append(f"at least {item.min_length}")
        elif getattr(item, "max_length", None) is not None:
            out.append(f"at most {item.max_length}")
        elif isinstance(item, AfterValidator):
            name = getattr(item.func, "__name__", "")
            if name in _VALIDATED:
                out.append(_VALIDATED[name])
        elif isinstance(item, FieldInfo):
            out.extend(_constraints(item.metadata))
        elif getattr(item, "pattern", None):
            out.append(f"matches `{item.pattern}`")
    return out


def _type(tp: Any, link: Callable[[type[BaseModel]], str]) -> str:
    """A reader's name for an annotation: scalars, lists, maps, choices and links to models."""
    origin = get_origin(tp)
    if origin is Annotated:
        base, *meta = get_args(tp)
        return ", ".join([_type(base, link), *_constraints(meta)])
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        text = " or ".join(_type(a, link) for a in args)
        return f"{text} or null" if len(args) < len(get_args(tp)) else text
    if origin is Literal:
        return " | ".join(f"`{v}`" for v in get_args(tp))
    if origin is list:
        return f"list of {_type(get_args(tp)[0], link)}"
    if origin is dict:
        key, value = get_args(tp)
        return f"map of {_type(key, link)} to {_type(value, link)}"
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return link(tp)
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(tp, str(tp))


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value: Any = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, BaseModel):
        return "its defaults"
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _section(model: type[BaseModel], paths: Paths) -> str:
    def link(sub: type[BaseModel]) -> str:
        first = _title(paths[sub][0])
        return f"[{first}](#{slug(first)})"

    path, *also = paths[model]
    doc = " ".join((model.__doc__ or "").split())
    if also:
        doc += " The same fields at " + ", ".join(_title(a) for a in also) + "."
    rows = [
        f"| `{field.alias or name}` | {_cell(_type(_annotation(field), link))} | {_cell(_default(field))} "
        f"| {_cell(field.description or '')} |"
        for name, field in model.model_fields.items()
    ]
    table = ["| field | type | default | what |", "|---|---|---|---|", *rows]
    return "\n".join([f"## {_title(path)}", "", doc, "", *table, ""])


def _annotation(field: FieldInfo) -> Any:
    """The field's annotation with its own constraints (pydantic moves them to `metadata`)."""
    if field.metadata:
        return Annotated[(field.annotation, *field.metadata)]
    return field.annotation


def render() -> str:
    """The whole docs/slo-spec.md page: the SLOSpec document, then alerts/windows.yaml."""
    paths: Paths = {}
    spec_models = list(_models(spec_schema.SpecDocumentModel, "", paths))
    paths[spec_schema.SpecDocumentModel] = ["(document)"]
    windows_models = list(_models(spec_schema.WindowsFileModel, "", paths))
    paths[spec_schema.WindowsFileModel] = ["alerts/windows.yaml"]
    parts = [HEADER]
    parts += [_section(m, paths) for m in spec_models]
    parts += [_section(m, paths) for m in windows_models]
    return "\n".join(parts)
