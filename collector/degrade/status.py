"""`lanewatch degrade status`: the state, each adapter's last apply and error, the last audit entries."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from .shared_store import Lease
from .state import AuditEntry, desired_state, state_to_json
from .store import Snapshot

__all__ = ["leader_line", "status_json", "status_text"]

Entries = list[tuple[int, int, AuditEntry]]
Reports = dict[str, dict[str, Any]]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def adapter_lines(reports: Reports) -> list[str]:
    """One line per adapter: what it last applied and when, and its last error (and whether it holds)."""
    lines = []
    for name, r in sorted(reports.items()):
        words = [f"adapter {name}:"]
        if "applied_revision" in r:
            held = sorted(r.get("lanes") or {})
            words.append(
                f"applied revision {r['applied_revision']} at {_when(r['applied_at'])}"
                f" ({'degraded lanes ' + ','.join(held) if held else 'no degrade'})"
            )
        else:
            words.append("nothing applied yet")
        if "error" in r:
            state = "since recovered" if r.get("applied_at", 0) >= r["error_at"] else "failing now"
            words.append(f"; last error at {_when(r['error_at'])} ({state}): {r['error']}")
        lines.append(" ".join(words).replace(" ;", ";"))
    return lines


def leader_line(lease: Lease | None) -> str:
    """Which controller of a pair leads, since when, and for how long its lease holds; or that none does."""
    if lease is None:
        return "leader: none (no controller has led yet)"
    if not lease.live:
        ago = lease.now - lease.expires_at
        return f"leader: NONE: {lease.holder}'s lease (term {lease.term}) expired {ago:.1f} s ago"
    return (
        f"leader: {lease.holder} ({lease.url}), term {lease.term}, since {_when(lease.acquired_at)}, "
        f"lease renewed to {lease.expires_at - lease.now:.1f} s from now"
    )


def status_text(
    snap: Snapshot,
    entries: Entries,
    adapters: Reports | None = None,
    *,
    paired: bool = False,
    lease: Lease | None = None,
) -> str:
    """A human-readable report of the state, the adapters and recent audit entries (and a pair's leader)."""
    lines = [leader_line(lease)] if paired else []
    lines.append(
        f"revision {snap.revision}" + (f", updated {_when(snap.updated_at)}" if snap.revision else "")
    )
    lanes = desired_state(snap.state)
    if not lanes:
        lines.append("no lane is degraded")
    for lane, spec in lanes.items():
        parts = []
        if "shift" in spec.active():
            parts.append(f"shift {spec.shift_percent}% to {spec.shift_to}")
        if spec.cap_max_tokens is not None:
            parts.append(f"cap max_tokens {spec.cap_max_tokens}")
        if spec.shed_classes:
            parts.append(f"shed {','.join(spec.shed_classes)}")
        lines.append(f"lane {lane}: {'; '.join(parts)}")
        lines += _why(entries, lane)
    for (lane, kind), t in sorted(snap.state.tracks.items()):
        held = (
            f"{len(t.firing)} firing alert(s)"
            if t.firing
            else f"all resolved since {_when(t.clear_since or 0)}"
        )
        lines.append(f"  {kind} on {lane}: step {t.step + 1}, since {_when(t.started_at)}, {held}")
    lines += adapter_lines(adapters or {})
    lines.append(f"last {len(entries)} audit entries:" if entries else "audit log is empty")
    for seq, rev, e in entries:
        words = [f"#{seq}", f"r{rev}", _when(e.at), e.event]
        words += [f"lane={e.lane}"] if e.lane else []
        words += [f"action={e.action}"] if e.action else []
        lines.append("  " + " ".join([*words, json.dumps(e.detail, sort_keys=True)]))
    return "\n".join(lines)


def _why(entries: Entries, lane: str) -> list[str]:
    """The lane's latest diagnosis (audit event `diagnosis`): its top findings, or why there are none."""
    latest = next((e for _, _, e in reversed(entries) if e.event == "diagnosis" and e.lane == lane), None)
    if latest is None:
        return []
    d = latest.detail
    if d.get("error"):
        return [f"  why: no diagnosis ({d['error']})"]
    findings = d.get("findings") or []
    if not findings:
        return [f"  why: no finding from {d.get('source', 'Prometheus')}"]
    out = []
    for f in findings:
        share = f.get("explains")
        explains = f" (explains {share['share']:.0%} of {share['of'].upper()})" if share else ""
        evidence = ", ".join(f"{s['signal']} {s['value']:g}" for s in f.get("evidence", []))
        out.append(f"  why: {f['check']}: {f['title']}{explains}" + (f"; {evidence}" if evidence else ""))
    return out


def status_json(
    snap: Snapshot,
    entries: Entries,
    adapters: Reports | None = None,
    *,
    paired: bool = False,
    lease: Lease | None = None,
) -> str:
    """The same report as JSON (`leader`, for a pair: its lease, null when none was ever taken)."""
    out: dict[str, Any] = {
        "revision": snap.revision,
        "adapters": adapters or {},
        "updated_at": snap.updated_at,
        "lanes": {lane: spec.to_json() for lane, spec in desired_state(snap.state).items()},
        "state": json.loads(state_to_json(snap.state)),
        "audit": [
            {
                "seq": seq,
                "revision": rev,
                "at": e.at,
                "event": e.event,
                "lane": e.lane,
                "action": e.action,
                "detail": e.detail,
            }
            for seq, rev, e in entries
        ],
    }
    if paired:
        out["leader"] = None if lease is None else {**lease.to_json(), "live": lease.live}
    return json.dumps(out, indent=2, sort_keys=True)
