"""HTTP header names lanewatch sends, reads or strips, written once. Lowercase, as HTTP/2 and
ASGI servers give them; HTTP/1.1 compares names case-insensitively.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "AUTHORIZATION",
    "CLASS_HEADER",
    "DEGRADED_HEADER",
    "LANE_HEADER",
    "MODEL_HEADER",
    "REQUEST_ID",
    "RESCUED_HEADER",
    "RESCUE_HEADER",
    "RETRY_AFTER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "TRACEPARENT",
    "TRACESTATE",
]

# The gateway's own headers.
LANE_HEADER: Final = "x-lanewatch-lane"  # request: force a lane; response: the lane that served it
DEGRADED_HEADER: Final = "x-lanewatch-degraded"  # response: the degrade actions applied
MODEL_HEADER: Final = "x-lanewatch-model"  # response: `<requested> -> <served>` when rewritten
CLASS_HEADER: Final = "x-lanewatch-class"  # request: the request class shedding acts on (default name)
RESCUE_HEADER: Final = "x-lanewatch-rescue"  # request: "off" opts the request out of the rescue
RESCUED_HEADER: Final = "x-lanewatch-rescued-from"  # response: the late lane a faster one answered for
# The degrade controller's webhook adapter signs its body with these.
SIGNATURE_HEADER: Final = "x-lanewatch-signature"  # "sha256=<hex HMAC-SHA256 of '<timestamp>.<body>'>"
TIMESTAMP_HEADER: Final = "x-lanewatch-timestamp"  # Unix seconds; receivers should refuse old ones
# Standard headers.
AUTHORIZATION: Final = "authorization"
TRACEPARENT: Final = "traceparent"  # W3C Trace Context
TRACESTATE: Final = "tracestate"
REQUEST_ID: Final = "x-request-id"
RETRY_AFTER: Final = "retry-after"
