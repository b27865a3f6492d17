"""The adapter registry: every kind of `degrade.adapters` entry, by its `kind`.

The config's adapter entries are a union discriminated by `kind`: `parse` picks the entry's
settings class here and validates the entry with it, so an error names the entry's own
field (`degrade.adapters.0.url`). The CLI's `--adapter` choices, `lanewatch degrade
adapters` and the table in docs/degrade.md all come from `table()` and `kinds()`. Adding an
adapter is one module (its adapter and its settings class) and one entry in `REGISTRY`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .base import CAPABILITY_NAMES, AdapterSettings
from .dry_run import DryRunSettings
from .envoy import EnvoySettings
from .gateway import GatewaySettings
from .litellm import LitellmSettings
from .nginx import NginxSettings
from .webhook import WebhookSettings

__all__ = ["REGISTRY", "Registry", "choose", "kind_of"]


def kind_of(settings: type[AdapterSettings]) -> str:
    """The `kind` a settings class answers to (its Literal's default)."""
    kind = settings.model_fields["kind"].default
    if not isinstance(kind, str):
        raise TypeError(f"{settings.__name__}.kind needs a default: the kind it answers to")
    return kind


class Registry:
    """The known adapter kinds, in the order they are listed."""

    def __init__(self, kinds: Iterable[type[AdapterSettings]]) -> None:
        self._kinds: dict[str, type[AdapterSettings]] = {}
        for settings in kinds:
            self.register(settings)

    def register(self, settings: type[AdapterSettings]) -> None:
        """Add a kind of adapter; ValueError when its kind is taken."""
        kind = kind_of(settings)
        if kind in self._kinds:
            raise ValueError(f"adapter kind {kind!r} is registered already")
        self._kinds[kind] = settings

    def unregister(self, kind: str) -> None:
        """Remove a kind (a test's fake adapter)."""
        del self._kinds[kind]

    def kinds(self) -> tuple[str, ...]:
        """Every kind, in registration order."""
        return tuple(self._kinds)

    def settings(self, kind: str) -> type[AdapterSettings]:
        """The settings class of `kind`; ValueError listing the kinds when unknown."""
        try:
            return self._kinds[kind]
        except KeyError:
            raise ValueError(f"unknown adapter kind {kind!r}; known: {', '.join(self._kinds)}") from None

    def summary(self, kind: str) -> str:
        """What adapter `kind` is, in one line (its settings class's docstring)."""
        return _summary(self.settings(kind))

    def parse(self, entry: object) -> AdapterSettings:
        """One `degrade.adapters` entry, validated by the settings class its `kind` names."""
        if isinstance(entry, AdapterSettings):
            return entry
        if isinstance(entry, str):  # `[gateway, dry-run]`: a kind alone, with its defaults
            entry = {"kind": entry}
        if not isinstance(entry, Mapping) or not isinstance(entry.get("kind"), str):
            raise ValueError(f"an adapter entry is a mapping with a `kind`: one of {', '.join(self._kinds)}")
        return self.settings(entry["kind"]).model_validate(dict(entry))

    def upgrade(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """A `degrade` section with the flat keys of older configs folded into `adapters` entries.

        `gateway_url: U` alone means `adapters: [{kind: gateway, url: U}]`; `adapters: [webhook]`
        with `webhook_url: U` means `[{kind: webhook, url: U}]`; a flat key sets its field on
        every entry of its kind (so a flag such as `--gateway` wins over the file's entry).
        """
        legacy = {key for s in self._kinds.values() for key in s.legacy_keys}
        out = {k: v for k, v in data.items() if k not in legacy}
        flat = {k: v for k, v in data.items() if k in legacy and v is not None}
        entries = list(out.get("adapters") or [])
        if not entries:
            entries = [{"kind": kind_of(s)} for s in self._kinds.values() if s.implied_by in flat]
        if entries or "adapters" in out:
            out["adapters"] = [self._fill(entry, flat) for entry in entries]
        return out

    def _fill(self, entry: object, flat: Mapping[str, Any]) -> object:
        bare = isinstance(entry, str)
        if isinstance(entry, AdapterSettings):
            entry = entry.model_dump()
        if isinstance(entry, str):
            entry = {"kind": entry}
        if not isinstance(entry, Mapping) or entry.get("kind") not in self._kinds:
            return entry  # parse() names what is wrong with it
        settings = self._kinds[entry["kind"]]
        filled = dict(entry)
        for key, field in settings.legacy_keys.items():
            if key in flat:
                filled[field] = flat[key]
        for field, info in settings.model_fields.items() if bare else ():
            if info.is_required() and field not in filled:
                keys = [k for k, f in settings.legacy_keys.items() if f == field]
                old = f" (or the flat key {keys[0]})" if keys else ""
                raise ValueError(f"adapter {entry['kind']!r} needs {field!r}{old}")
        return filled

    def table(self) -> str:
        """Markdown: each kind, what it can do (the actions, the model rewrite), its settings, what it is."""
        names = CAPABILITY_NAMES
        head = ["| kind | " + " | ".join(names) + " | settings | what |", "|---" * (len(names) + 3) + "|"]
        rows = []
        for kind, s in self._kinds.items():
            can = " | ".join("yes" if a in s.capabilities else "no" for a in names)
            fields = ", ".join(f"`{f}`" for f in s.model_fields if f != "kind")
            rows.append(f"| `{kind}` | {can} | {fields} | {_summary(s)} |")
        return "\n".join([*head, *rows])


def _summary(settings: type[AdapterSettings]) -> str:
    return (settings.__doc__ or "").strip().splitlines()[0]


def choose(entries: Sequence[AdapterSettings], kinds: Sequence[str]) -> list[AdapterSettings | str]:
    """The configured entries of each of `kinds` (in that order), or the bare kind where none is."""
    out: list[AdapterSettings | str] = []
    for kind in dict.fromkeys(kinds):
        out += [e for e in entries if e.kind == kind] or [kind]
    return out


REGISTRY = Registry(
    [GatewaySettings, WebhookSettings, DryRunSettings, EnvoySettings, NginxSettings, LitellmSettings]
)
