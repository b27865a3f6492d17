"""The adapter seam: one protocol every router adapter implements, and its config entry's base.

An adapter makes one router hold the controller's whole desired degrade state (declarative:
the same state sent twice changes nothing), reads back what the router actually holds, and
declares the actions it can take. The controller strips the actions an adapter cannot take
before it applies (`restrict`), and audits and counts each one it skipped; the policy never
knows which router it drives. One capability is not an action: `rewrite_model`, asking the
faster lane for a model it serves on a shift. A router without it still shifts, with the
request body unchanged, and the controller audits and counts `rewrite_model` as skipped.
Pure, apart from `read_secret`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from lanewatch.collector.common import secrets
from lanewatch.collector.common.errors import UpstreamError
from lanewatch.collector.degrade_state.wire import ACTIONS, ActionName, LaneDegrade

__all__ = [
    "ALL_ACTIONS",
    "CAPABILITY_NAMES",
    "REWRITE_MODEL",
    "Adapter",
    "AdapterError",
    "AdapterSettings",
    "Capability",
    "RouterView",
    "read_secret",
    "restrict",
]

Capability = ActionName | Literal["rewrite_model"]
REWRITE_MODEL: Final = "rewrite_model"  # a shift asks the faster lane for a model it serves
CAPABILITY_NAMES: tuple[Capability, ...] = (*ACTIONS, REWRITE_MODEL)
ALL_ACTIONS: frozenset[Capability] = frozenset(CAPABILITY_NAMES)  # every action, the model rewrite too


class AdapterError(UpstreamError):
    """An apply or read-back that failed; the message is safe to log (no secrets, no bodies we sent)."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class RouterView:
    """What a router holds, read back from it: its degraded lanes, and its lane order where it has one."""

    lanes: dict[str, LaneDegrade] = field(default_factory=dict)
    lane_order: tuple[str, ...] | None = None
    version: int | None = None  # the router's own counter of state changes, where it keeps one
    revision: int | None = None  # the controller's revision the router says it holds, where it keeps one


class Adapter(Protocol):
    """Something that makes a router hold the desired degrade state."""

    name: str
    capabilities: frozenset[Capability]  # the actions this router can take; the rest are skipped

    async def apply(self, lanes: dict[str, LaneDegrade], revision: int) -> None:
        """Make the router hold exactly `lanes` (a lane absent has no degrade); AdapterError if not."""

    async def read_back(self) -> RouterView | None:
        """What the router holds now; None when it cannot be asked. AdapterError if asking failed."""

    async def finalize(self, revision: int) -> None:
        """Put the router back as it was before the controller: no degrade anywhere."""

    async def shutdown(self) -> None:
        """Release connections and files; the router keeps what it was last told."""


def restrict(
    lanes: Mapping[str, LaneDegrade], capabilities: frozenset[Capability]
) -> tuple[dict[str, LaneDegrade], list[tuple[str, Capability]]]:
    """`lanes` without the actions outside `capabilities`, and the (lane, capability) pairs dropped.

    A shift kept by a router that cannot rewrite the model drops `rewrite_model` alone.
    """
    kept: dict[str, LaneDegrade] = {}
    dropped: list[tuple[str, Capability]] = []
    for lane, spec in sorted(lanes.items()):
        off = [a for a in spec.active() if a not in capabilities]
        dropped += [(lane, a) for a in off]
        if "shift" in spec.active() and "shift" not in off and REWRITE_MODEL not in capabilities:
            dropped.append((lane, REWRITE_MODEL))
        spec = replace(
            spec,
            shift_to=None if "shift" in off else spec.shift_to,
            shift_percent=0 if "shift" in off else spec.shift_percent,
            cap_max_tokens=None if "cap_max_tokens" in off else spec.cap_max_tokens,
            shed_classes=() if "shed" in off else spec.shed_classes,
        )
        if spec.active():
            kept[lane] = spec
    return kept, dropped


def read_secret(path: Path, what: str) -> str:
    """A token or key from a file; AdapterError says what is wrong with it (never the secret)."""
    try:
        return secrets.read_secret(path, what)
    except ValueError as exc:
        raise AdapterError(str(exc), retryable=False) from None


class AdapterSettings(BaseModel):
    """One entry of `degrade.adapters`: which router (`kind`) and how to reach it.

    A subclass per adapter declares `kind` as a one-value Literal, its own URL and secret
    files, the actions its router can take, and `build`, which reads the secrets and returns
    the adapter. The registry (registry.py) lists the subclasses.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    # The adapter's name in metrics, logs and the audit log; default: its kind. Two entries of
    # one kind need names of their own.
    name: str | None = Field(default=None, pattern=r"^[a-z][a-z0-9_-]{0,31}$")

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    # Flat `degrade.*` keys of older configs (and the flags that set them) -> this entry's field.
    legacy_keys: ClassVar[Mapping[str, str]] = {}
    # A flat key that, in a config with no `adapters` list, means "drive this adapter".
    implied_by: ClassVar[str | None] = None

    @property
    def label(self) -> str:
        """The adapter's name: `name`, else `kind`."""
        return self.name or self.kind

    def build(self) -> Adapter:
        """The adapter this entry describes (reads its secret files); AdapterError if it cannot."""
        raise NotImplementedError

    def renderer(self) -> Callable[[dict[str, LaneDegrade]], object] | None:
        """What the router would be given for a state, rendered without touching the router, where
        its apply renders a file: AdapterError for a state the apply would refuse. None: no render.

        The controller and `lanewatch config check` render every state the policy can ask for
        with it at start (preflight.py), so a refusal stops the start, not an incident's apply.
        """
        return None
