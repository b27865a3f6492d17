"""The shared rules for names and URLs: lane names, request-class names and HTTP base URLs.

A lane name is a Prometheus label value (`lane`), an HTTP header value (`x-lanewatch-lane`)
and a key in the gateway's admin API, so it keeps to characters that are safe in all three
without quoting: ASCII letters, digits, `_`, `.` and `-`, 1 to 32 of them. `:` is refused
because header and log lines use it as a separator. Config targets, gateway lanes, the degrade
policy and SLO specs all validate lane names with `LaneName`, and request classes with
`ClassName`; a repeated name anywhere is refused through `check_unique`.

`[HOST:]PORT` listen addresses, as config and flags give them, and whether one stays on this host."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Hashable, Iterable, Sequence
from typing import Annotated, Final, TypeVar

from pydantic import AfterValidator

__all__ = [
    "CLASS_NAME_PATTERN",
    "LANE_NAME_PATTERN",
    "ClassName",
    "HttpUrl",
    "LaneName",
    "check_class_name",
    "check_http_url",
    "check_lane_name",
    "check_unique",
    "duplicates",
    "is_loopback",
    "parse_listen",
    "repeats",
]


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
S = TypeVar("S", bound=Sequence[Hashable])

LANE_NAME_PATTERN: Final = r"^[A-Za-z0-9_.-]{1,32}$"
CLASS_NAME_PATTERN: Final = r"^[a-z][a-z0-9_-]{0,31}$"
_LANE = re.compile(LANE_NAME_PATTERN)
_CLASS = re.compile(CLASS_NAME_PATTERN)


def check_lane_name(value: str) -> str:
    """`value` if it is a valid lane name, else ValueError saying the rule."""
    if not _LANE.fullmatch(value):
        raise ValueError(f"bad lane name {value!r}: use letters, digits, '_', '.', '-' (1-32)")
    return value


def check_class_name(value: str) -> str:
    """`value` if it is a valid request-class name, else ValueError saying the rule."""
    if not _CLASS.fullmatch(value):
        raise ValueError(f"bad class name {value!r}: a lowercase letter, then a-z, 0-9, '_', '-' (1-32)")
    return value


def check_http_url(value: str) -> str:
    """`value` without a trailing slash if it is an http(s) URL with a host, else ValueError."""
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in ("http", "https"):
        raise ValueError(f"{value!r} must start with http:// or https://")
    if not rest.split("/", 1)[0]:
        raise ValueError(f"{value!r} has no host")
    if any(c.isspace() for c in value):
        raise ValueError(f"{value!r} contains whitespace")
    return value.rstrip("/")


def repeats(items: Iterable[tuple[K, V]]) -> list[tuple[K, V, V]]:
    """Each item whose key came before: (key, the first item's value, its own value)."""
    first: dict[K, V] = {}
    out: list[tuple[K, V, V]] = []
    for key, value in items:
        if key in first:
            out.append((key, first[key], value))
        else:
            first[key] = value
    return out


def duplicates(values: Iterable[K]) -> list[K]:
    """The values that occur more than once, each listed once, in the order they repeat."""
    return list(dict.fromkeys(key for key, _, _ in repeats((v, None) for v in values)))


def check_unique(values: S, what: str) -> S:
    """`values` if no value repeats, else ValueError naming the repeated ones (`what`: "lane names")."""
    dupes = duplicates(values)
    if dupes:
        raise ValueError(f"duplicate {what}: {', '.join(str(d) for d in dupes)}")
    return values


LaneName = Annotated[str, AfterValidator(check_lane_name)]
ClassName = Annotated[str, AfterValidator(check_class_name)]
HttpUrl = Annotated[str, AfterValidator(check_http_url)]


def parse_listen(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` (IPv6 as `[::1]:PORT`) to (host, port); host defaults to 127.0.0.1."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if not port_text.isdigit() or int(port_text) > 65535 or (sep and not host):
        raise ValueError(f"expected [HOST:]PORT with PORT 0-65535, got {value!r}")
    return host, int(port_text)


def is_loopback(host: str) -> bool:
    """Whether a listen host is reachable from this machine only (127.0.0.0/8, ::1, `localhost`).

    A name other than `localhost` counts as reachable from elsewhere: what it resolves to can change.
    """
    host = host.strip().removeprefix("[").removesuffix("]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
