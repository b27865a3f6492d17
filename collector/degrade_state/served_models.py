"""Which models a lane serves, and which one it is asked for under another name. Pure.

One definition for every router that moves a request to another lane: the gateway's lanes
(`gateway.lanes.<lane>.models`, `model_map`) and the Envoy adapter's (`degrade.adapters[].lanes`)
are this model. A request served on a lane that does not serve the model it names is asked
of that lane for its `model_map` entry of the name, else for the lane's first model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lanewatch.collector.common.validation import check_unique

__all__ = ["ServedModels", "serve_as_declared"]


class ServedModels(BaseModel):
    """A lane's models (the first is what a request for another model is asked as) and its map."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # The model names this lane's upstreams serve; the first is what a request for another model
    # is rewritten to when it is served here (a degrade shift, a routing rule). Empty: not declared,
    # requests pass with the model they name.
    models: list[str] = Field(default_factory=list)
    model_map: dict[str, str] = Field(default_factory=dict)  # requested model -> one of `models`

    @field_validator("models")
    @classmethod
    def _model_names(cls, value: list[str]) -> list[str]:
        if any(not name.strip() for name in value):
            raise ValueError("model names must not be empty")
        return check_unique(value, "model names")

    @model_validator(mode="after")
    def _map_targets_served(self) -> ServedModels:
        if self.model_map and not self.models:
            raise ValueError("model_map needs models: the names this lane serves")
        for requested, served in self.model_map.items():
            if not requested.strip():
                raise ValueError("model_map: a requested model name must not be empty")
            if requested in self.models:
                raise ValueError(f"model_map: {requested!r} is served by this lane itself; drop the entry")
            if served not in self.models:
                raise ValueError(f"model_map: {requested!r} -> {served!r}, not one of models {self.models}")
        return self


def serve_as_declared(lane: ServedModels, requested: str) -> str:
    """The model `lane` is asked for when a request for `requested` is served there."""
    if not lane.models or requested in lane.models:
        return requested
    return lane.model_map.get(requested, lane.models[0])
