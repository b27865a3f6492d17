"""`[HOST:]PORT` listen addresses, as config and flags give them."""

from __future__ import annotations

__all__ = ["parse_listen"]


def parse_listen(value: str) -> tuple[str, int]:
    """`[HOST:]PORT` (IPv6 as `[::1]:PORT`) to (host, port); host defaults to 127.0.0.1."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.removeprefix("[").removesuffix("]")
    if not port_text.isdigit() or int(port_text) > 65535 or (sep and not host):
        raise ValueError(f"expected [HOST:]PORT with PORT 0-65535, got {value!r}")
    return host, int(port_text)
