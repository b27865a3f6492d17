"""records.jsonl: one `RequestTiming.to_json()` object per line, read back with every line checked.

A line that is not a record is an error naming its line number and the field at fault;
callers that would rather keep going pass `skip_bad=True` and get the bad lines counted.
Blank lines are ignored (a file cut off after its last newline is still whole).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import operator
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pydantic import TypeAdapter, ValidationError

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.record.rules import RecordError
from lanewatch.collector.record.timing import FINITE_FIELDS, RequestTiming

# Validates types (a string where seconds belong, an unknown error kind) before a record
# is built, so nothing downstream meets a value it cannot plot or sum.
_RECORD = TypeAdapter(RequestTiming)
_FLOAT_FIELDS = tuple(
    f.name for f in dataclasses.fields(RequestTiming) if f.type in ("float", "float | None")
)
# What a built record may still hold as NaN or infinity (the rest it refused when built).
_UNBOUNDED_NAMES = tuple(name for name in _FLOAT_FIELDS if name not in FINITE_FIELDS)
_UNBOUNDED = operator.attrgetter(*_UNBOUNDED_NAMES)
_CHUNK_BYTES = 8 << 20


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
    # The records read stay alive to the end: collections while reading would only walk the
    # growing heap again and again.
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
