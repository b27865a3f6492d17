"""The bearer-token check every lanewatch API shares (collector ingest, gateway admin, degrade webhook)."""

from __future__ import annotations

import hmac

__all__ = ["bearer_ok"]


def bearer_ok(header: str | None, token: str) -> bool:
    """Whether an Authorization header is `Bearer <token>`; constant time in the token's content."""
    scheme, _, value = (header or "").partition(" ")
    # compare first, so a wrong scheme and a wrong token take the same path
    same = hmac.compare_digest(value.strip().encode("utf-8", "replace"), token.encode())
    return same and scheme.lower() == "bearer"
