"""`[HOST:]PORT` listen addresses, as config and flags give them, and whether one stays on this host."""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback", "parse_listen"]


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
