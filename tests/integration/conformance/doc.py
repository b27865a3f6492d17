"""docs/routers/conformance.md, generated from the table (rows.py) and the routers' declarations.

`python -m tests.integration.conformance.doc` rewrites it; a test fails while it is stale.
"""

from __future__ import annotations

from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.layout import ROOT

from .routers import ROUTERS, Entry
from .rows import GAPS, REFERENCE, RESCUE_FIRST_S, ROWS, TTFT_SLOS, Declared, Row, exercised

__all__ = ["DOC", "render"]

DOC = ROOT / "docs" / "routers" / "conformance.md"

HEAD = """\
# Router conformance

<!-- generated from tests/integration/conformance/ by `python -m tests.integration.conformance.doc` -->

One table of degrade states × requests runs against lanewatch's gateway (the reference
semantics), a real Envoy, a real nginx and a real LiteLLM proxy with lanewatch's handler, each
in front of the same two test upstreams (lanes `fast` and `slow`), as part of `make test`
(`tests/integration/conformance/`, marked `integration`). Per request it checks what a user
sees: the status (a `429` shed or a work over a cap, with `Retry-After: 30`, or a `200`),
which upstream served it, the `model` and `max_tokens` that upstream received, and the
`x-lanewatch-*` response headers. Before its requests, each row applies its state through the
router's adapter, less the actions the adapter does not declare (`restrict()`, as the
controller applies it), and reads back what the router holds.

A router is expected to do what the gateway does, less what it declares it cannot: the
actions its adapter's settings lack (`capabilities`, as in [degrade.md](../degrade.md#adapters)),
and the named gaps below. A request that gets anything else fails its row; every difference
from the reference must be one a declared gap explains, and every declared gap must show in
some row. The run ends with a summary of the gaps each router showed. A new router joins with
one entry in `ROUTERS` (`tests/integration/conformance/routers.py`).

How each router is set up to choose: a lane by the `x-lanewatch-lane` header (`fast` or
`slow`), `fast` by the path `/v1/completions` or by a model of the fast lane (`small`,
`small-x`), else `slow`; a class `batch` by the `x-tenant-tier: batch` header, `tagged` by
the model (`small-x`, `big-x`), `long` by a work of 1000 tokens or more (`max_tokens` × `n`,
or `best_of` when larger, × the prompts of a `/v1/completions` prompt list), `huge` by a prompt
of 2000 characters or more, `bulk` by the path `/v1/completions`, `chat` by the path
`/v1/chat/completions`, else `interactive` (Envoy's template classes `long` by work, which
its Lua script reads from the body; nginx's maps read no body). The lanes serve
different models (`fast`: `small`, `small-x`; `slow`: `big`, `big-x`), so a request that
reaches a lane not serving its model shows whether the router rewrote it. A cap bounds a
request's work: `max_tokens` becomes at most floor(cap / (sequences × prompts)), and a request
whose sequences × prompts alone exceed the cap is refused `429` with `x-lanewatch-degraded:
cap_max_tokens`.
"""


def _state(state: dict[str, LaneDegrade] | object) -> str:
    if not isinstance(state, dict) or not state:
        return "none"
    parts = []
    for lane, spec in sorted(state.items()):
        acts = []
        if spec.shift_to is not None:
            acts.append(f"shift {spec.shift_percent:g} % to {spec.shift_to}")
        if spec.cap_max_tokens is not None:
            acts.append(f"cap {spec.cap_max_tokens}")
        if spec.shed_classes:
            acts.append("shed " + ", ".join(spec.shed_classes))
        parts.append(f"{lane}: {'; '.join(acts)}")
    return " / ".join(parts)


def _result(row: Row, declared: Declared) -> str:
    gaps = exercised(row, declared)
    return "pass" if not gaps else "gap: " + ", ".join(f"`{g}`" for g in sorted(gaps))


def _declaration(kind: str, entry: Entry, declared: Declared) -> list[str]:
    missing = [c for c in REFERENCE.capabilities if c not in declared.capabilities]
    out = [f"### `{kind}`", ""]
    caps = ", ".join(f"`{c}`" for c in sorted(missing)) or "none"
    out.append(f"- actions its adapter does not declare: {caps}")
    out += [f"- `{g}`: {GAPS[g]}; {why}" for g, why in sorted(entry.gaps.items())]
    out += [
        f"- known divergence, a strict xfail on row `{r}`: {why}" for r, why in sorted(entry.xfail.items())
    ]
    return [*out, ""]


def render(declared: dict[str, Declared]) -> str:
    """The page, for the routers' declarations `declared` (kind -> Declared)."""
    kinds = list(ROUTERS)
    out = [HEAD, "## Rows", "", "| row | state | requests | what it checks |", "|---|---|---|---|"]
    for row in ROWS:
        before = "".join(f"{_state(dict(s))}, then " for s in row.before)
        sent = f"{row.requests_sent()}" + (
            "" if row.repeat == 1 else f" ({len(row.requests)} request × {row.repeat})"
        )
        out.append(f"| `{row.name}` | {before}{_state(dict(row.state))} | {sent} | {row.what} |")
    out += ["", "## Results", "", "| row | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for row in ROWS:
        cells = []
        for kind in kinds:
            cell = _result(row, declared[kind])
            cells.append(f"xfail: {cell}" if row.name in ROUTERS[kind].xfail else cell)
        out.append(f"| `{row.name}` | " + " | ".join(cells) + " |")
    out += ["", "## Declared gaps", ""]
    for kind in kinds:
        out += _declaration(kind, ROUTERS[kind], declared[kind])
    out += ["", "## Rescue", "", RESCUE, "", "| router | a late first token |", "|---|---|"]
    for kind in kinds:
        reason = ROUTERS[kind].no_rescue
        cell = "rescued from the fast lane (the reference)" if reason is None else f"waits: {reason}"
        out.append(f"| {kind} | {cell} |")
    return "\n".join(out).rstrip() + "\n"


RESCUE = f"""\
One more row runs apart from the table: a streamed request on the slow lane (TTFT SLO \
{TTFT_SLOS["slow"]:g} s) whose first token the upstream sends only after {RESCUE_FIRST_S:g} s. The gateway \
rescues it ([gateway.md](../gateway.md#rescue)): the client gets its first token from the fast \
lane within the SLO, with `x-lanewatch-rescued-from: slow`, and the slow attempt is closed. A \
router that cannot declares why, and serves the request from the slow lane, late."""


def declarations() -> dict[str, Declared]:
    """Each router's declaration, from its adapter's settings class and its entry's gaps."""
    from lanewatch.collector.degrade.adapters.registry import REGISTRY

    return {
        kind: Declared(REGISTRY.settings(kind).capabilities, frozenset(entry.gaps))
        for kind, entry in ROUTERS.items()
    }


def main() -> None:
    """Rewrite docs/routers/conformance.md."""
    DOC.write_text(render(declarations()))


if __name__ == "__main__":
    main()
