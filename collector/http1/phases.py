"""The upstream leg's phases: perf_counter() stamps the upstream client takes per request.

On a reused keep-alive connection DNS, connect and TLS are 0: this request made no lookup,
no TCP handshake and no TLS handshake.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LegTimes"]


@dataclass(slots=True)
class LegTimes:
    """Milestones of one upstream request (perf_counter seconds; None = not reached)."""

    start: float = 0.0
    reused: bool = False
    dns_start: float | None = None
    dns_end: float | None = None
    conn_start: float | None = None
    conn_end: float | None = None  # TCP established
    tls_end: float | None = None  # TLS handshake done (https only)
    ready: float | None = None  # a connection to send on, new or reused
    sent: float | None = None  # request written
    headers: float | None = None  # response head received

    def _span(self, a: float | None, b: float | None) -> float | None:
        if self.reused:
            return 0.0
        return None if a is None or b is None else max(b - a, 0.0)

    @property
    def dns_s(self) -> float | None:
        """Name resolution (a cached answer takes ~0)."""
        return self._span(self.dns_start, self.dns_end)

    @property
    def connect_s(self) -> float | None:
        """TCP handshake."""
        return self._span(self.conn_start, self.conn_end)

    @property
    def tls_s(self) -> float | None:
        """TLS handshake; 0 over plain HTTP once connected."""
        if self.tls_end is None:
            return 0.0 if (self.reused or self.conn_end is not None) else None
        return self._span(self.conn_end, self.tls_end)

    @property
    def send_s(self) -> float | None:
        """Writing the request once a connection was ready."""
        return None if self.ready is None or self.sent is None else max(self.sent - self.ready, 0.0)
