"""The bearer-token check every lanewatch API shares (collector ingest, gateway admin, degrade webhook)."""

from __future__ import annotations

import hmac

__all__ = ["bearer_ok", "holds_token"]


def bearer_ok(header: str | None, token: str) -> bool:
    """Whether an Authorization header is `Bearer <token>`; constant time in the token's content."""
    scheme, _, value = (header or "").partition(" ")
    # compare first, so a wrong scheme and a wrong token take the same path
    same = hmac.compare_digest(value.strip().encode("utf-8", "replace"), token.encode())
    return same and scheme.lower() == "bearer"


def holds_token(header: str, token: str) -> bool:
    """Whether an Authorization header's credential is `token`, under any scheme or none; constant time."""
    whole = header.strip()
    _scheme, _, value = whole.partition(" ")
    secret = token.encode()
    # both compared always, so a bare token (no scheme) takes the same path as a `Bearer` one
    bare = hmac.compare_digest(whole.encode("utf-8", "replace"), secret)
    after_scheme = hmac.compare_digest(value.strip().encode("utf-8", "replace"), secret)
    return bare or after_scheme
