"""A request's class, decided by the operator: pure rules over the request, hints only from trusted clients.

The class is what shedding acts on and what the request metrics are labelled with, so a
client must not be able to choose it: without trust, a `batch` request that leaves out
`x-lanewatch-class`, or names another class, or asks for the fast lane with
`x-lanewatch-lane`, is still classed (and routed) by the operator's rules. A trusted client
(`gateway.hints`: a network or the hint token) may name its class and lane; a class name
outside the gateway's classes counts as `other`, so the set stays closed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from lanewatch.collector.classify.rules import ClassRule, ReadingConfig, class_of
from lanewatch.collector.common.errors import ProtocolViolation
from lanewatch.collector.common.headers import AUTHORIZATION, LANE_HEADER
from lanewatch.collector.common.secrets import bearer_ok
from lanewatch.collector.common.validation import CLASS_NAME_PATTERN
from lanewatch.collector.gateway.settings import GatewayConfig
from lanewatch.collector.record.timing import Api
from lanewatch.exporters.names import OTHER_VALUE

from .routing import RouteInput, route_input

__all__ = ["ClassHintError", "Classifier", "classify_request"]

_CLASS = re.compile(CLASS_NAME_PATTERN)
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class ClassHintError(ProtocolViolation, ValueError):
    """A trusted client named a class that is no class name (a 400 for the client)."""


@dataclass(frozen=True, slots=True)
class Classifier:
    """The gateway's classification: its rules, its default class, and whom it trusts to hint."""

    rules: tuple[ClassRule, ...]
    default_class: str
    classes: frozenset[str]
    header: str
    networks: tuple[Network, ...] = ()
    token: str | None = None
    reading: ReadingConfig = field(default_factory=ReadingConfig)

    @classmethod
    def from_config(cls, cfg: GatewayConfig, token: str | None) -> Classifier:
        """The classifier of a validated gateway config; `token` is the hint token read from its file."""
        nets = tuple(ipaddress.ip_network(n, strict=False) for n in cfg.hints.trusted_networks)
        return cls(
            tuple(cfg.classes), cfg.default_class, cfg.class_names, cfg.class_header, nets, token, cfg.reading
        )

    def trusted(self, peer: str | None, authorization: str | None) -> bool:
        """Whether a client at `peer` sending this Authorization header may hint its class and lane."""
        if self.token is not None and authorization is not None and bearer_ok(authorization, self.token):
            return True
        if not self.networks or peer is None:
            return False
        try:
            addr = ipaddress.ip_address(peer.split("%", 1)[0])  # an IPv6 zone id is no part of the address
        except ValueError:
            return False
        # A dual-stack listener sees an IPv4 client as ::ffff:a.b.c.d; its IPv4 networks still hold it.
        mapped = addr.ipv4_mapped if isinstance(addr, ipaddress.IPv6Address) else None
        return any(addr in net or (mapped is not None and mapped in net) for net in self.networks)

    def by_rules(self, req: RouteInput, api: Api) -> str:
        """The first rule's class the request matches (`max_tokens` over its work), else the default class."""
        return class_of(self.rules, self.default_class, api, req.model, req.work, req.prompt_chars)

    def hinted(self, value: str) -> str:
        """A trusted client's class: one of the gateway's classes, or `other`; ClassHintError if malformed."""
        name = value.strip().lower()
        if not _CLASS.match(name):
            raise ClassHintError(f"bad request class {name[:40]!r}")
        return name if name in self.classes else OTHER_VALUE


def classify_request(
    c: Classifier, headers: Mapping[str, str], peer: str | None, body: Mapping[str, object], api: Api
) -> tuple[str, RouteInput]:
    """The request's class and what routing reads of it (the lane header only from a trusted client);
    ReadingError for a max_tokens, max_completion_tokens, n, best_of or prompt vLLM would refuse."""
    trusted = c.trusted(peer, headers.get(AUTHORIZATION))
    req = route_input(body, headers.get(LANE_HEADER) if trusted else None, api, c.reading)
    hint = headers.get(c.header) if trusted else None
    return (c.hinted(hint) if hint else c.by_rules(req, api)), req
