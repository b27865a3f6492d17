"""Log lines for a target's vLLM families that are missing or read by an older name, once each."""

from __future__ import annotations

from lanewatch.exporters import names

from .scrape import ServerSnapshot, missing_families


class FamilyNotices:
    """Remembers which (target, family) notices were given, so each is logged once per process."""

    def __init__(self) -> None:
        self._given: set[tuple[str, str]] = set()

    def notices(self, snap: ServerSnapshot) -> list[str]:
        """Messages not yet given for this snapshot's target (none for a failed scrape)."""
        if not snap.up:
            return []
        out = []
        for family in missing_families(snap.families):
            if self._first(snap.target, family):
                older = ", ".join(names.vllm_family_names(family)[1:])
                also = f" (nor its older name {older})" if older else ""
                out.append(
                    f"target {snap.target}: vLLM exposes no {family}{also}; "
                    f"lanewatch reports it in {names.SCRAPE_MISSING_FAMILIES} and its panels stay empty"
                )
        for old in sorted(snap.legacy_names):
            current = names.VLLM_LEGACY_ALIASES[old]
            if self._first(snap.target, old):
                out.append(f"target {snap.target}: reading vLLM's older name {old} as {current}")
        return out

    def _first(self, target: str, family: str) -> bool:
        key = (target, family)
        if key in self._given:
            return False
        self._given.add(key)
        return True
