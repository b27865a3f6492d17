"""records.jsonl: one `RequestTiming.to_json()` object per line, read back with every line checked.

A line that is not a record is an error naming its line number and the field at fault;
callers that would rather keep going pass `skip_bad=True` and get the bad lines counted.
Blank lines are ignored (a file cut off after its last newline is still whole).

`keyed_records` reads a file as a stream, each record with the byte offset of its line, so a
reader that folds records as they come (the diagnosis) holds a few numbers per record, not the
records; `records_at` reads the lines at given offsets again. `read_records` keeps them all.

A line longer than MAX_LINE_BYTES is refused (naming its line) before it is decoded: decoding a
line takes some 16 times its size, and the reader never holds more of one than the limit.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.record.codec import RecordDecodeError, decode_record, encode_record_json
from lanewatch.collector.record.timing import RequestTiming

_CHUNK_BYTES = 8 << 20
# The longest line read. The collector writes at most 1,024 gaps, two 64 Ki-character texts and 32
# attrs per record (rules.py, itl.py): under 1.6 MB even with every character escaped.
MAX_LINE_BYTES = 2 << 20
_TOO_LONG = f"longer than {MAX_LINE_BYTES:,} bytes (MAX_LINE_BYTES), not read"


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
        return decode_record(line)
    except RecordDecodeError as exc:
        raise RecordFileError(line_no, str(exc)) from None


def parse_record_lines(lines: Iterable[str | bytes], *, skip_bad: bool = False) -> RecordsRead:
    """Every record in the lines (numbered from 1); raise on the first bad line unless skip_bad."""
    bad: list[RecordFileError] = []
    keyed = _records(((0, line) for line in lines), bad if skip_bad else None)
    return RecordsRead(tuple(record for _, record in keyed), tuple(bad))


def read_records(path: Path, *, skip_bad: bool = False) -> RecordsRead:
    """Read a records.jsonl file (see parse_record_lines)."""
    bad: list[RecordFileError] = []
    with _no_collections():
        records = tuple(record for _, record in keyed_records(path, bad if skip_bad else None))
    return RecordsRead(records, tuple(bad))


def keyed_records(
    path: Path, bad: list[RecordFileError] | None = None
) -> Iterator[tuple[int, RequestTiming]]:
    """Each record of the file with its line's byte offset, as read; a bad line raises, or with
    `bad` given is appended there and skipped. OSError when the file cannot be read."""
    with path.open("rb") as f:  # bytes: a line that is not UTF-8 gets its number too
        yield from _records(_offset_lines(f), bad)


def records_at(path: Path, offsets: Sequence[int]) -> Iterator[tuple[int, RequestTiming]]:
    """The records on the lines starting at `offsets` (as keyed_records gave them), read again."""
    with path.open("rb", buffering=0) as f:  # unbuffered: a line is read, not a buffer around it
        for offset in offsets:
            yield offset, decode_record(_line_at(f.fileno(), offset))


def _line_at(fd: int, offset: int, guess: int = 4096) -> bytes:
    """The line starting at byte `offset` of the file, without its newline."""
    data = os.pread(fd, guess, offset)
    while (end := data.find(b"\n")) < 0:
        more = os.pread(fd, max(len(data), guess), offset + len(data))
        if not more:
            return data
        data += more
    return data[:end]


def _records(
    lines: Iterable[tuple[int, str | bytes | None]], bad: list[RecordFileError] | None
) -> Iterator[tuple[int, RequestTiming]]:
    """(key, record) of each line that is not blank, numbered from 1; a bad line raises, or with
    `bad` given is kept there and skipped. None stands for a line over MAX_LINE_BYTES, not read."""
    for line_no, (key, line) in enumerate(lines, start=1):
        if line is not None and (not line or line.isspace()):  # no copy of the line, as strip() makes
            continue
        try:
            if line is None or len(line) > MAX_LINE_BYTES:
                raise RecordFileError(line_no, _TOO_LONG)
            record = parse_record_line(line, line_no)
        except RecordFileError as exc:
            if bad is None:
                raise
            bad.append(exc)
            continue
        yield key, record


@contextmanager
def _no_collections() -> Iterator[None]:
    """No garbage collections while records pile up: each would only walk the growing heap again."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _offset_lines(
    f: IO[bytes], chunk: int = _CHUNK_BYTES, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes | None]]:
    """The file's lines (without their newline), each with its byte offset, read in large chunks;
    a line over `limit` bytes comes as None (its bytes are passed over, never held)."""
    offset = 0
    for line, size in _lines(f, chunk, limit):
        yield offset, line
        offset += size + 1


def _lines(
    f: IO[bytes], chunk: int = _CHUNK_BYTES, limit: int = MAX_LINE_BYTES
) -> Iterator[tuple[bytes | None, int]]:
    """Each line (without its newline) and its size, read in large chunks; None for one over `limit`."""
    rest = b""
    skipped = -1  # the bytes of an over-long line passed over so far; -1 while none is
    while block := f.read(chunk):
        if skipped >= 0:  # inside an over-long line: drop its bytes up to its newline
            end = block.find(b"\n")
            if end < 0:
                skipped += len(block)
                continue
            yield None, skipped + end
            block, skipped = block[end + 1 :], -1
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        if max(map(len, lines), default=0) > limit:  # one C pass per chunk; rare
            yield from ((None if len(line) > limit else line, len(line)) for line in lines)
        else:
            yield from ((line, len(line)) for line in lines)
        if len(rest) > limit:
            skipped, rest = len(rest), b""
    if skipped >= 0:
        yield None, skipped
    elif rest:
        yield (None if len(rest) > limit else rest), len(rest)


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
    return encode_record_json(record).decode() + "\n"
