"""Which lane owns a model that more than one lane serves: the lane a request naming it is routed to. Pure.

Routing sends a request for a model the default lane does not own to the lane that owns it
(routing.py, `served_model`). Without owners, a default lane whose upstream also lists
another lane's model (a multi-model engine, a LoRA adapter of the same name) would take every
request for that model. The rules, in order:

1. Declared wins. A model some lane declares (`gateway.lanes.<lane>.models`) is owned by a
   declaring lane, whatever any upstream lists: the default lane when it declares it, else
   the fastest declaring lane (`lane_order`). Two declaring lanes are the operator's choice,
   not a collision.
2. First learned wins. A learned model stays with the lane that listed it first
   (`previous`, the owners of the last decision), through every refresh, and is released
   only when that lane stops listing it.
3. Ties (listed first in the same round, as at start): the default lane, then `lane_order`,
   as for declared models and as before owners existed: two lanes that serve the same model
   (one engine on two tiers) keep its requests on the default lane. A restarted gateway (or
   worker) has no history, so it sees a model two lanes list as a tie: declare the model on
   the lane that must have it.

Every other lane that lists an owned model is a `Collision`: the gateway logs each new one
once and counts it (`lanewatch_gateway_model_collisions_total{lane}`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Collision", "Ownership", "decide_owners"]


@dataclass(frozen=True, slots=True, order=True)
class Collision:
    """`lane` lists `model`, which `owner` owns: requests naming it go to `owner`."""

    model: str
    owner: str
    lane: str


@dataclass(frozen=True, slots=True)
class Ownership:
    """Each served model's owner, and every lane listing a model it does not own."""

    owners: Mapping[str, str]  # model -> lane
    collisions: frozenset[Collision] = frozenset()

    def elsewhere(self, default: str) -> dict[str, str]:
        """The models a lane other than `default` owns -> that lane."""
        return {model: lane for model, lane in self.owners.items() if lane != default}


def decide_owners(
    declared: Mapping[str, Sequence[str]],
    learned: Mapping[str, Sequence[str]],
    previous: Mapping[str, str],
    ranked: Sequence[str],
) -> Ownership:
    """Owners by the rules above; `ranked` is the default lane, then the others fastest first.

    `learned` of a lane that also declares models is ignored (a declaration always wins).
    """
    rank = {lane: i for i, lane in enumerate(ranked)}
    ordered = sorted(set(declared) | set(learned), key=lambda lane: (rank.get(lane, len(rank)), lane))
    listing = {lane: tuple(learned[lane]) for lane in ordered if lane in learned and lane not in declared}
    owners: dict[str, str] = {}
    for lane in ordered:
        for model in declared.get(lane, ()):
            owners.setdefault(model, lane)
    for model, lane in previous.items():
        if model not in owners and model in listing.get(lane, ()):
            owners[model] = lane  # first learned: kept while its lane still lists it
    for lane in ordered:
        for model in listing.get(lane, ()):
            owners.setdefault(model, lane)
    return Ownership(owners, _collisions(owners, declared, listing))


def _collisions(
    owners: Mapping[str, str], declared: Mapping[str, Sequence[str]], listing: Mapping[str, Sequence[str]]
) -> frozenset[Collision]:
    """Each (model, owner, lane) where `lane` serves a model another lane owns, bar declared pairs."""
    out = set()
    for lane, models in [*declared.items(), *listing.items()]:
        for model in models:
            owner = owners[model]
            both_declared = lane in declared and owner in declared
            if owner != lane and not both_declared:
                out.add(Collision(model, owner, lane))
    return frozenset(out)
