"""What of an upstream's response head reaches the client. Pure.

The upstream's status line and headers are passed on as text, so a CR, LF or NUL in one of
them would end the client's head early: whatever followed (a `Set-Cookie`, a whole second
response) would reach the client as the gateway's own. Such a head is refused whole (the
client gets 502). Hop-by-hop headers, and the ones the gateway frames or sets itself, are
not passed on; `x-lanewatch-*` headers are the gateway's alone, so an upstream's are dropped
and the gateway's own follow.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lanewatch.collector.http1.message import HttpError, ResponseHead

__all__ = ["check_head", "client_headers"]

_UNSAFE = re.compile(r"[\r\n\x00]")
_HOP_BACK = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "upgrade", "content-length", "date", "server"}
)
_OWN_PREFIX = "x-lanewatch-"  # the prefix of every header in common/headers.py's "gateway's own"


def check_head(head: ResponseHead) -> None:
    """HttpError when the reason phrase, a header name or a header value holds CR, LF or NUL."""
    if _UNSAFE.search(head.reason):
        raise HttpError("CR, LF or NUL in the status line's reason phrase")
    for name, value in head.headers:
        if _UNSAFE.search(name) or _UNSAFE.search(value):  # the value is never echoed: it may be a secret
            raise HttpError(f"CR, LF or NUL in response header {name[:40]!r}")


def client_headers(head: ResponseHead, own: Mapping[str, str]) -> list[tuple[str, str]]:
    """The upstream's end-to-end headers (repeats kept, in order), then the gateway's `own`."""
    out = [
        (k, v)
        for k, v in head.headers
        if (low := k.lower()) not in _HOP_BACK and not low.startswith(_OWN_PREFIX)
    ]
    out += own.items()
    return out
