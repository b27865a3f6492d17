"""Give freed heap memory back to the operating system (glibc's `malloc_trim`), where there is one.

A burst of short-lived allocations (gRPC calls opened and reset at once, each with a
message buffer) is freed when it ends, but glibc keeps the pages in its arenas, so the
process stays as large as the burst was. `trim()` returns them; the collector calls it
now and then from a worker thread. Elsewhere (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["trim"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        fn = getattr(libc, "malloc_trim", None)
    except OSError:
        return None
    if fn is None:
        return None
    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
    trim_fn: Callable[[int], int] = fn
    return trim_fn


def trim() -> bool:
    """Return free heap pages to the OS; True when glibc's malloc_trim ran and released some."""
    fn = _malloc_trim()
    return bool(fn(0)) if fn is not None else False
