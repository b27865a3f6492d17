"""Waiting in tests, with one contract: poll a condition until it holds, or fail naming what was awaited.

    pid = eventually(lambda: read_pid(path), 20, "the child's pid", context=log.read_text)

`check` is called at least once, and once more at or after the deadline; its first truthy
result is returned. An exception from `check` (a process that died, say) ends the wait at once.
On time-out an AssertionError names `what`, the limit and whatever `context()` returns (a log).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
POLL_S = 0.05


def _failure(what: str, within_s: float, context: Callable[[], str] | None) -> AssertionError:
    detail = context() if context else ""
    return AssertionError(f"not within {within_s} s: {what}" + (f"\n{detail}" if detail else ""))


def eventually(
    check: Callable[[], T],
    within_s: float,
    what: str,
    *,
    every_s: float = POLL_S,
    context: Callable[[], str] | None = None,
) -> T:
    """`check()`'s first truthy result within `within_s`; AssertionError naming `what` otherwise."""
    deadline = time.monotonic() + within_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, within_s, context)
        time.sleep(every_s)


async def eventually_async(
    check: Callable[[], T],
    within_s: float,
    what: str,
    *,
    every_s: float = POLL_S,
    context: Callable[[], str] | None = None,
) -> T:
    """`eventually` for a test running on the event loop: sleeps without blocking it."""
    deadline = time.monotonic() + within_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _failure(what, within_s, context)
        await asyncio.sleep(every_s)


def settled(
    read: Callable[[], T], quiet_s: float, within_s: float, what: str, *, every_s: float = POLL_S
) -> T:
    """`read()` once it has not changed for `quiet_s`: something that stopped progressing, measured then."""
    deadline = time.monotonic() + within_s
    last, since = read(), time.monotonic()
    while True:
        time.sleep(every_s)
        now, value = time.monotonic(), read()
        if value != last:
            last, since = value, now
        elif now - since >= quiet_s:
            return value
        if now >= deadline:
            raise AssertionError(f"not within {within_s} s: {what} (still changing: {value!r})")
