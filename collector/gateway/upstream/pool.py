"""A lane's pool of upstreams: least-outstanding-requests balancing and health ejection.

Pure bookkeeping; the proxy reports outcomes and the health checker reports probes.
An upstream is ejected after `eject_after` consecutive failures (connect errors,
timeouts, 5xx) or a failed health check, and comes back on a passing health check or a
success. When every upstream of a lane is ejected the pool fails open (picks among all)
rather than refusing traffic on what may be a wrong verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

__all__ = ["LanePool", "Upstream", "upstream_name"]


def upstream_name(url: str) -> str:
    """The label for an upstream: host:port of its URL."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.hostname}:{port}"


@dataclass(eq=False, slots=True)
class Upstream:
    """One upstream server of a lane and what the gateway knows of it."""

    url: str
    lane: str
    name: str = ""
    outstanding: int = 0
    failures: int = 0  # consecutive
    healthy: bool = True
    host: str = field(init=False, default="")
    port: int = field(init=False, default=0)
    tls: bool = field(init=False, default=False)
    prefix: str = field(init=False, default="")  # path prefix of the base URL, e.g. /vllm
    host_header: str = field(init=False, default="")

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        self.tls = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        if not self.name:
            self.name = upstream_name(self.url)


@dataclass(slots=True)
class LanePool:
    """The upstreams of one lane."""

    lane: str
    upstreams: list[Upstream]
    eject_after: int = 3
    _next: int = field(default=0, repr=False)

    @classmethod
    def of(cls, lane: str, urls: Sequence[str], eject_after: int = 3) -> LanePool:
        """A pool over these base URLs."""
        return cls(lane, [Upstream(url=u, lane=lane) for u in urls], eject_after)

    def pick(self, exclude: Iterable[Upstream] = ()) -> Upstream | None:
        """The healthy upstream with the fewest requests in flight (ties rotate); None if none left."""
        if len(self.upstreams) == 1 and not exclude:
            return self.upstreams[0]  # a lane of one: it, healthy or not (fail open)
        skip = set(map(id, exclude))
        candidates = [u for u in self.upstreams if id(u) not in skip]
        healthy = [u for u in candidates if u.healthy] or candidates  # fail open
        if not healthy:
            return None
        start = self._next % len(healthy)
        self._next += 1
        ring = healthy[start:] + healthy[:start]
        return min(ring, key=lambda u: u.outstanding)

    def succeeded(self, u: Upstream) -> None:
        """A request got a non-5xx answer from `u`."""
        u.failures = 0
        u.healthy = True

    def failed(self, u: Upstream) -> None:
        """A request to `u` failed to connect, timed out or got a 5xx."""
        u.failures += 1
        if u.failures >= self.eject_after:
            u.healthy = False

    def checked(self, u: Upstream, ok: bool) -> None:
        """A health check of `u` passed or failed."""
        if ok:
            self.succeeded(u)
        else:
            u.healthy = False

    @property
    def healthy_count(self) -> int:
        """How many upstreams are in rotation."""
        return sum(u.healthy for u in self.upstreams)
