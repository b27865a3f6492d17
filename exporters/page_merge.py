"""Several /metrics pages of one kind merged into one: the gateway's workers, scraped as one. Pure.

Every worker renders its page with the same code, so a series is written the same way on
each (the same name, labels in the same order): the text before a sample's value is its
key. Counters, histograms (buckets, `_sum`, `_count`) and summaries are summed; a `_created`
sample keeps the earliest time. Gauges are summed (requests in flight, records queued) except
those that say the same thing on every worker: the degrade state's version and the
`*_info` families take the highest, an upstream's health the lowest (0 when any worker has
it out of rotation). Families keep the order they first appear in, their series too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from prometheus_client.utils import floatToGoString

from . import names

__all__ = ["MergedPage", "merge_pages"]

_MAX_GAUGES = frozenset({names.GATEWAY_DEGRADE_STATE_VERSION, names.GATEWAY_LANE_MODEL_INFO})
_MIN_GAUGES = frozenset({names.GATEWAY_UPSTREAM_HEALTHY})
_SUMMED = frozenset({"counter", "histogram", "summary"})


@dataclass(slots=True)
class _Family:
    comments: list[str] = field(default_factory=list)
    kind: str = "untyped"
    values: dict[str, float] = field(default_factory=dict)  # sample key (name and labels) -> value


@dataclass(slots=True)
class MergedPage:
    """Pages merged so far; `text()` renders them as one page."""

    families: dict[str, _Family] = field(default_factory=dict)

    def add(self, page: str, monotonic_only: bool = False) -> None:
        """Merge one page in; `monotonic_only` takes only its counters, histograms and summaries
        (what a worker that exited had counted keeps counting in the sum)."""
        family: _Family | None = None
        for line in page.splitlines():
            if line.startswith("#"):
                family = self._comment(line, monotonic_only)
                continue
            if not line or family is None:
                continue  # a sample before any family's header: not written by this project's renderers
            key, _, text = line.rpartition(" ")
            if key:
                _combine(family, key, float(text))

    def _comment(self, line: str, monotonic_only: bool) -> _Family | None:
        parts = line.split(" ", 3)
        if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
            return None
        name = parts[2]
        family = self.families.get(name)
        if family is None:
            family = self.families[name] = _Family()
        if len(family.comments) < 2 and line not in family.comments:
            family.comments.append(line)
        if parts[1] == "TYPE" and len(parts) == 4:
            family.kind = parts[3]
            family.comments.sort(key=lambda c: not c.startswith("# HELP"))
        if monotonic_only and family.kind not in _SUMMED:
            return None if parts[1] == "TYPE" else family
        return family

    def text(self) -> str:
        """The merged page in the Prometheus text format."""
        out: list[str] = []
        for family in self.families.values():
            out.extend(family.comments)
            out.extend(f"{key} {_number(value)}" for key, value in family.values.items())
        return "\n".join(out) + "\n" if out else ""


def _number(value: float) -> str:
    """A value as prometheus_client writes it (`1.0`, `+Inf`)."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]
    return text


def _combine(family: _Family, key: str, value: float) -> None:
    values = family.values
    held = values.get(key)
    if held is None:
        values[key] = value
        return
    name = key.partition("{")[0]
    if name.endswith("_created"):
        values[key] = min(held, value)
    elif family.kind in _SUMMED:
        values[key] = held + value
    elif name in _MAX_GAUGES:
        values[key] = max(held, value)
    elif name in _MIN_GAUGES:
        values[key] = min(held, value)
    else:
        values[key] = held + value


def merge_pages(pages: Iterable[str], retired: Iterable[str] = ()) -> str:
    """One page from several workers' pages, plus the counters of `retired` pages (workers gone)."""
    merged = MergedPage()
    for page in pages:
        merged.add(page)
    for page in retired:
        merged.add(page, monotonic_only=True)
    return merged.text()
