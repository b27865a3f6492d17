"""The event loop every long-running command runs on: uvloop where it is installed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop factory, or None (asyncio's own loop) where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    # Its C event loop halves the Python cost of each socket wake-up (a streamed chunk, a probe).
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
