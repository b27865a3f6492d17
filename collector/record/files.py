"""records.jsonl: one `RequestTiming.to_json()` object per line, read back with every line checked.

A line that is not a record is an error naming its line number and the field at fault;
callers that would rather keep going pass `skip_bad=True` and get the bad lines counted.
Blank lines are ignored (a file cut off after its last newline is still whole).

Reading is one path with a fast lane: a line shaped as `record_line` writes it (every value of
its field's exact JSON type) is parsed once and checked field by field in C-speed passes; any
other line goes through the full pydantic validation, which gives the established error for
it. The fast lane takes only lines that validation would take, and builds the same record.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import os
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import IO, Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import ErrorKind, RequestTiming

# Validates types (a string where seconds belong, an unknown error kind) before a record
# is built, so nothing downstream meets a value it cannot plot or sum.
_RECORD = TypeAdapter(RequestTiming)
_FLOAT_FIELDS = tuple(
    f.name for f in dataclasses.fields(RequestTiming) if f.type in ("float", "float | None")
)
_CHUNK_BYTES = 8 << 20


def _named(*types: str) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(RequestTiming) if f.type in types)


# The fast lane's field groups by declared type; _SPECIAL are checked one by one. A field of
# another type fails the import (tests/unit/collector/record/test_files.py), not a record.
_REQUIRED_TEXT = _named("str")
_OPTIONAL_TEXT = _named("str | None")
_OPTIONAL_FLOAT = _named("float | None")
_OPTIONAL_INT = _named("int | None")
_SPECIAL = ("source", "api", "started_at", "error", "itl_s", "itl_stats", "tokens_from_usage",
            "phases_source", "attrs")  # fmt: skip
_NAMES = frozenset(f.name for f in dataclasses.fields(RequestTiming))
if {*_REQUIRED_TEXT, *_OPTIONAL_TEXT, *_OPTIONAL_FLOAT, *_OPTIONAL_INT, *_SPECIAL} != _NAMES:
    raise AssertionError("files.py: a RequestTiming field the fast lane does not know")
_STR = {str}
_STR_OR_NONE = {str, type(None)}
_FLOAT = {float}
_FLOAT_OR_NONE = {float, type(None)}
_INT_OR_NONE = {int, type(None)}
_SOURCES = ("probe", "tap")
_APIS = ("chat", "completions")
_PHASES_SOURCES = (None, "span", "response")
_ERRORS = frozenset(kind.value for kind in ErrorKind)
_ORDER = tuple(f.name for f in dataclasses.fields(RequestTiming))
_DEFAULTS = tuple(
    None if f.default is dataclasses.MISSING else f.default for f in dataclasses.fields(RequestTiming)
)
_SET = object.__setattr__


class RecordFileError(ConfigError, ValueError):
    """A line of a records file that is not a record."""

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason


@dataclass(frozen=True, slots=True)
class RecordsRead:
    """The records of a file, and the lines skipped as not records (when skipping)."""

    records: tuple[RequestTiming, ...]
    bad_lines: tuple[RecordFileError, ...] = ()


def parse_record_line(line: str | bytes, line_no: int) -> RequestTiming:
    """One records.jsonl line as a record; RecordFileError says why it is not one."""
    try:
        data = from_json(line)
    except ValueError:  # not JSON, not UTF-8, a lone surrogate: the full path says which
        data = None
    kwargs = _fast_kwargs(data)
    if kwargs is None:
        return _validated(line, line_no)
    try:
        record = _build(kwargs)
    except RecordError as exc:
        raise RecordFileError(line_no, f"field {exc.field!r}: {exc.reason}") from None
    if bad := non_finite_field(record):
        raise RecordFileError(line_no, f"field {bad!r}: not a finite number")
    return record


def _validated(line: str | bytes, line_no: int) -> RequestTiming:
    """The full validation: every line the fast lane does not take, with pydantic's reasons."""
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            raise RecordFileError(line_no, "not UTF-8 text") from None
    try:
        record = _RECORD.validate_json(line)
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "json_invalid":
            raise RecordFileError(line_no, _first_problem(exc)) from None
        # pydantic's parser refuses a "\ud800" escape (a lone surrogate) that json decodes and
        # the record repairs: a line an older gateway wrote is still read.
        record = _from_json_module(line, line_no, exc)
    if bad := non_finite_field(record):
        raise RecordFileError(line_no, f"field {bad!r}: not a finite number")
    return record


def _from_json_module(line: str, line_no: int, first: ValidationError) -> RequestTiming:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        raise RecordFileError(line_no, _first_problem(first)) from None
    try:
        return _RECORD.validate_python(data)
    except ValidationError as exc:
        raise RecordFileError(line_no, _first_problem(exc)) from None


def parse_record_lines(lines: Iterable[str | bytes], *, skip_bad: bool = False) -> RecordsRead:
    """Every record in the lines (numbered from 1); raise on the first bad line unless skip_bad."""
    records: list[RequestTiming] = []
    bad: list[RecordFileError] = []
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(parse_record_line(line, line_no))
        except RecordFileError as exc:
            if not skip_bad:
                raise
            bad.append(exc)
    return RecordsRead(tuple(records), tuple(bad))


def read_records(path: Path, *, skip_bad: bool = False) -> RecordsRead:
    """Read a records.jsonl file (see parse_record_lines)."""
    # The records read stay alive to the end: collections while reading would only walk a
    # growing heap again and again (a third of the time on a 100,000-record file).
    paused = gc.isenabled()
    gc.disable()
    try:
        with path.open("rb") as f:  # bytes: a line that is not UTF-8 gets its number too
            return parse_record_lines(_lines(f), skip_bad=skip_bad)
    finally:
        if paused:
            gc.enable()


def _lines(f: IO[bytes], chunk: int = _CHUNK_BYTES) -> Iterator[bytes]:
    """The file's lines (without their newline), read in large chunks."""
    rest = b""
    while block := f.read(chunk):
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        yield from lines
    if rest:
        yield rest


def open_for_append(path: Path) -> IO[str]:
    """A records file opened to append lines (line-buffered), its folder made as needed.

    A new file is created owner-only (0600): records can carry prompt and response text when
    record_content is on. An existing file keeps the mode its owner gave it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)


class RecordsWriter:
    """The one records.jsonl appender: one `RequestTiming.to_json()` per line, flushed per line.

    Opening fails with OSError naming the path; `close()` may be called more than once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: IO[str] | None = open_for_append(path)
        except OSError as exc:
            raise OSError(f"records file {path}: cannot open: {exc.strerror or exc}") from None

    def write(self, record: RequestTiming) -> None:
        """Append one record; ValueError once closed."""
        if self._file is None:
            raise ValueError(f"records file {self.path} is closed")
        self._file.write(record_line(record))

    def close(self) -> None:
        """Flush and close the file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> RecordsWriter:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def record_line(record: RequestTiming) -> str:
    """One record as a records.jsonl line, newline included."""
    return json.dumps(record.to_json(), separators=(",", ":"), allow_nan=False) + "\n"


def non_finite_field(record: RequestTiming) -> str | None:
    """The first float field holding NaN or infinity (JSON parsers let `NaN`, `1e999` through)."""
    for name in _FLOAT_FIELDS:
        value = getattr(record, name)
        if value is not None and not math.isfinite(value):
            return name
    gaps = record.itl_s
    if not gaps or math.isfinite(sum(gaps)):  # one C pass; NaN and infinities make the sum non-finite
        return None
    return next((f"itl_s.{i}" for i, gap in enumerate(gaps) if not math.isfinite(gap)), None)


def _build(fields: dict[str, Any]) -> RequestTiming:
    """RequestTiming(**fields), its fields set in one C loop (the generated __init__ costs a call each)."""
    record: RequestTiming = object.__new__(RequestTiming)
    deque(map(_SET, repeat(record), _ORDER, map(fields.get, _ORDER, _DEFAULTS)), maxlen=0)
    record.__post_init__()
    return record


def _fast_kwargs(data: object) -> dict[str, Any] | None:
    """A parsed line's fields as RequestTiming's arguments, when each has its exact JSON type; else None.

    The checks run over groups of fields (map, set: C loops), since a file holds many records.
    """
    if type(data) is not dict:
        return None
    data.pop("tpot_s", None)  # derived, written for readers of the file, not a field
    if not data.keys() <= _NAMES:
        data = {k: v for k, v in data.items() if k in _NAMES}
    get = data.get
    gaps = get("itl_s", [])
    attrs = get("attrs", {})
    error = get("error")
    if not (
        set(map(type, map(get, _REQUIRED_TEXT))) == _STR
        and set(map(type, map(get, _OPTIONAL_TEXT))) <= _STR_OR_NONE
        and set(map(type, map(get, _OPTIONAL_FLOAT))) <= _FLOAT_OR_NONE
        and set(map(type, map(get, _OPTIONAL_INT))) <= _INT_OR_NONE
        and type(get("started_at", 0.0)) is float
        and type(get("tokens_from_usage", False)) is bool
        and get("source") in _SOURCES
        and get("api", "chat") in _APIS
        and get("phases_source") in _PHASES_SOURCES
        and (error is None or (type(error) is str and error in _ERRORS))
        and get("itl_stats") is None  # a sampled record: rare, and its totals are checked in full
        and type(gaps) is list
        and set(map(type, gaps)) <= _FLOAT
        and type(attrs) is dict
        and set(map(type, attrs)) <= _STR
        and set(map(type, attrs.values())) <= _STR
    ):
        return None
    data["itl_s"] = tuple(gaps)
    data["attrs"] = attrs  # a fresh dict per line, as the field's default factory gives
    if error is not None:
        data["error"] = ErrorKind(error)
    return data


def _first_problem(exc: ValidationError) -> str:
    errors = exc.errors()
    err = errors[0]
    if err["type"] == "json_invalid":
        return f"not JSON ({err['msg'].removeprefix('Invalid JSON: ')})"
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, RecordError):
        return f"field {cause.field!r}: {cause.reason}"
    if not err["loc"]:
        return "expected a JSON object"
    field = ".".join(str(part) for part in err["loc"]) or "record"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"field {field!r}: {err['msg']}{more}"
