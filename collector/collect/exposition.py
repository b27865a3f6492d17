"""Sample lines of the Prometheus text format, parsed fast, with prometheus_client's results.

A /metrics page from vLLM is ~450 lines, of which lanewatch reads ~180 (collect/scrape.py
filters them first). prometheus_client's parser walks each line character by character in
Python (~15-20 µs a line here). Almost every line vLLM writes has one plain form:
`name{k="v",...} value [timestamp]` with no escapes and no stray spaces; one regular
expression takes that form apart in a few µs. Any line outside that form (escapes, spaces
around `=`, a duplicate label, `__name__` in the braces, an odd value) goes to
prometheus_client's own parser, so every line yields what that parser yields, errors too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Sample", "parse_samples"]

Sample = tuple[str, Mapping[str, str], float]  # (name, labels, value); labels read-only

# name, {labels} (no backslash inside; a `}` inside a value fails the labels check below),
# one space, the value, optionally one space and a timestamp (ignored, as lanewatch does).
_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}\\]*)\})? ([^ \t_]+)(?: ([^ \t_]+))?")
_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*"'
_LABELS = re.compile(rf"(?:{_PAIR}(?:,{_PAIR})*,?)?")
_PAIRS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]*)"')


# The same label sets come back on every scrape of every target: parse each text once. The
# dicts are shared, so callers must not change them; the cache is cleared when it grows.
_LABEL_CACHE: dict[str, dict[str, str] | None] = {}
_LABEL_CACHE_MAX = 8192


def _labels(text: str) -> dict[str, str] | None:
    """The labels inside `{...}` of the plain form; None when the full parser must decide."""
    if text in _LABEL_CACHE:
        return _LABEL_CACHE[text]
    labels: dict[str, str] | None = None
    if _LABELS.fullmatch(text) is not None:
        pairs = _PAIRS.findall(text)
        labels = dict(pairs)
        if len(labels) != len(pairs) or "__name__" in labels:
            labels = None  # prometheus_client refuses or reinterprets these: let it
    if len(_LABEL_CACHE) >= _LABEL_CACHE_MAX:
        _LABEL_CACHE.clear()
    _LABEL_CACHE[text] = labels
    return labels


def _plain(line: str) -> Sample | None:
    """The sample on a line of the plain form; None when the line needs the full parser."""
    m = _LINE.fullmatch(line)
    if m is None:
        return None
    name, labels_text, value_text, stamp = m.groups()
    labels = _labels(labels_text) if labels_text else {}
    if labels is None:
        return None
    try:
        value = float(value_text)
        if stamp is not None:
            float(stamp)  # not kept, but a bad one fails the line as it does in prometheus_client
    except ValueError:
        return None
    return name, labels, value


def _full(line: str) -> Iterator[Sample]:
    """prometheus_client's parse of one line (raises what it raises)."""
    for family in text_string_to_metric_families(line + "\n"):
        for s in family.samples:
            yield s.name, dict(s.labels), float(s.value)


def parse_samples(lines: list[str]) -> Iterator[Sample]:
    """Samples of sample lines (no comments, no TYPE lines), each parsed as prometheus_client would."""
    plain = _plain
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        sample = plain(line)
        if sample is not None:
            yield sample
        else:
            yield from _full(line)
