"""What of the client's request head goes upstream. Pure.

The client's headers pass, repeats kept, less the hop-by-hop ones, the gateway's own
(`x-lanewatch-lane`, the trace context it writes itself) and Accept-Encoding (the tap reads the
answer plain); an Authorization that carries the hint token (a credential for the gateway alone)
never leaves, and a lane's API key replaces whatever the client sent.
"""

from __future__ import annotations

from collections.abc import Mapping

from multidict import CIMultiDict

from lanewatch.collector.common.headers import AUTHORIZATION, LANE_HEADER, TRACEPARENT, TRACESTATE
from lanewatch.collector.common.secrets import holds_token

__all__ = ["upstream_headers"]

_AUTH_HEADER = AUTHORIZATION  # a header's name, compared as a name (the credential goes through bearer_ok)

# Hop-by-hop and gateway-owned headers: never passed upstream as the client sent them.
_HOP = frozenset(
    {
        *("connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"),
        *("transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"),
        *(TRACEPARENT, TRACESTATE, "expect", LANE_HEADER),
    }
)


def upstream_headers(
    incoming: Mapping[str, str], api_key: str | None, hint_token: str | None = None
) -> CIMultiDict[str]:
    """The client's headers, repeats kept, less hop-by-hop ones and Accept-Encoding (the tap reads plain),
    and less any Authorization that carries the hint token (a credential for the gateway alone)."""
    out = CIMultiDict(
        (k, v)
        for k, v in incoming.items()
        if k.lower() not in _HOP and not (hint_token is not None and _carries(k, v, hint_token))
    )
    if api_key is not None:
        # Replaces every Authorization the client sent; written in the case clients and servers log.
        out[AUTHORIZATION.title()] = f"Bearer {api_key}"
    return out


def _carries(name: str, value: str, token: str) -> bool:
    return name.lower() == _AUTH_HEADER and holds_token(value, token)
