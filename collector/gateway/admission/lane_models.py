"""Which model a lane serves a request with: the lanes' declared or learned models and the rewrite. Pure.

A lane that declares its models (gateway.lanes.<lane>.models) serves only those; a lane that
declares none serves what its upstreams' `GET /v1/models` last listed (model_discovery.py),
once they answered. A request
that lands on a lane not serving its `model` (shifted there by a degrade, or sent there by
a routing rule) is asked of that lane under another name: the lane's `model_map` entry for
the requested name, else the lane's first model. When every lane declares its models, a
model no lane serves or maps is refused with a 404 before routing (learned lists never make
that check: an upstream may load a model between two refreshes). A model more than one lane
serves belongs to one of them (model_ownership.py): a request naming it is routed there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lanewatch.collector.gateway.settings import GatewayConfig

from .model_ownership import Collision, decide_owners

__all__ = ["LaneModels", "header_value", "serve_as"]

_HEADER_MAX = 200  # characters of each name in x-lanewatch-model


@dataclass(frozen=True, slots=True)
class LaneModels:
    """Every lane's served models (first: the default target of a rewrite) and model maps."""

    served: Mapping[str, tuple[str, ...]]  # lane -> models; a lane absent declared none
    maps: Mapping[str, Mapping[str, str]]  # lane -> {requested model -> one of the lane's models}
    order: tuple[str, ...]  # lanes fastest first: who serves a model first
    names: frozenset[str]  # every model some lane serves or maps (checked on every request)
    complete: bool  # every lane declared its models, so a model none serves is known to be unknown
    learned: frozenset[str] = frozenset()  # lanes whose models come from their upstreams' /v1/models
    owners: Mapping[str, str] = field(default_factory=dict)  # model -> the lane a request naming it goes to
    collisions: frozenset[Collision] = frozenset()  # lanes listing a model another lane owns

    @classmethod
    def from_config(
        cls,
        cfg: GatewayConfig,
        learned: Mapping[str, Sequence[str]] | None = None,
        previous: Mapping[str, str] | None = None,
    ) -> LaneModels:
        """The lanes' declarations of a validated gateway config; `learned` (lane -> the models its
        upstreams list) fills in a lane that declared none; `previous` is the last owners (model ->
        lane), so a learned model stays with the lane that listed it first."""
        lanes, order = cfg.lanes, tuple(cfg.ordered_lanes)
        declared = {name: tuple(lane.models) for name, lane in lanes.items() if lane.models}
        served = dict(declared)
        complete = bool(order) and all(lane in served for lane in order)
        found = {lane: tuple(ms) for lane, ms in (learned or {}).items() if ms and lane in lanes}
        taught = frozenset(found) - frozenset(served)
        served.update({lane: found[lane] for lane in taught})
        maps = {name: dict(lane.model_map) for name, lane in lanes.items() if lane.model_map}
        names = frozenset(m for models in served.values() for m in models) | {
            k for m in maps.values() for k in m
        }
        default = cfg.effective_default_lane
        ranked = (*([default] if default else []), *(lane for lane in order if lane != default))
        taught_models = {lane: found[lane] for lane in taught}
        owned = decide_owners(declared, taught_models, previous or {}, ranked)
        return cls(
            served=served,
            maps=maps,
            order=order,
            names=names,
            complete=complete,
            learned=taught,
            owners=owned.owners,
            collisions=owned.collisions,
        )

    def knows(self, lane: str) -> bool:
        """The lane's models are known: declared, or listed by its upstreams."""
        return lane in self.served

    def source(self, lane: str) -> str:
        """Where the lane's models come from: declared, learned or unknown."""
        if lane in self.learned:
            return "learned"
        return "declared" if lane in self.served else "unknown"

    def served_elsewhere(self, default: str) -> dict[str, str]:
        """Models a lane other than the default owns -> that lane (model_ownership.py).

        Without this a request naming the small model would go to the default (big) lane and be
        rewritten to the big model there; the client asked for the small one. A model the
        default lane also lists stays with the lane that owns it.
        """
        if default not in self.served:  # the default lane serves what it is asked: nothing to steer
            return {}
        return {model: lane for model, lane in self.owners.items() if lane != default}

    def known(self, model: str) -> bool:
        """Some lane serves `model` or maps it."""
        return model in self.names

    def first_lane_serving(self, model: str) -> str | None:
        """The fastest lane that serves `model` itself (not through a map), or None."""
        for lane in self.order:
            if model in self.served.get(lane, ()):
                return lane
        return None

    def unknown_model_message(self, model: str) -> str:
        """The 404's message: the model asked for and every lane's models."""
        listing = "; ".join(f"{lane}: {', '.join(self.served.get(lane, ()))}" for lane in self.order)
        return f"The model `{model[:200]}` does not exist on this gateway. Lanes serve {listing}."


def serve_as(models: LaneModels, lane: str, requested: str) -> str:
    """The model `lane` is asked for when a request for `requested` is served there."""
    own: Sequence[str] | None = models.served.get(lane)
    if own is None or requested in own:  # a lane of unknown models is asked as the client asked
        return requested
    if lane in models.learned and requested not in models.names:
        # No lane lists the name (a typo, or a model loaded since the last refresh): asked as
        # named, so the engine answers for it as it would without the gateway.
        return requested
    mapped = models.maps.get(lane, {}).get(requested)
    return mapped if mapped is not None else own[0]


def header_value(requested: str, served: str) -> str:
    """`x-lanewatch-model`'s value, `<requested> -> <served>`, safe for a header line.

    The requested name comes from the client: control characters (a CR or LF would end the
    header) and non-ASCII become '?', and each name is cut to 200 characters.
    """
    return f"{_printable(requested)} -> {_printable(served)}"


def _printable(name: str) -> str:
    text = name[:_HEADER_MAX]
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if c.isascii() and c.isprintable() else "?" for c in text)
