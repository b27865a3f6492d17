"""The conformance table: degrade states × requests, and what a user sees of each (pure, no I/O).

Every router under test sits in front of the same two lanes and is configured to choose
lanes and classes the same ways (routers.py):

- lanes: `fast` (models `small`, `small-x`) and `slow` (models `big`, `big-x`, the default);
  a request picks `fast` or `slow` by the `x-lanewatch-lane` header, `fast` by the path
  `/v1/completions`, or `fast` by naming a model of the fast lane; tried in that order.
- classes: `batch` by the `x-tenant-tier: batch` header, `tagged` by a model (`small-x`,
  `big-x`), `long` by a work of 1000 tokens or more (`max_tokens` x `n`, or `best_of` when
  larger, x the prompts of a `/v1/completions` list), `huge` by a prompt of 2000 characters or
  more, `bulk` by the path `/v1/completions`, `chat` by the path `/v1/chat/completions`; the
  first that matches, in that order, else `interactive` (which no row sheds).

`expect` is the reference semantics, the gateway's (collector/degrade_state/state.py
`decide` and the proxy's rewrite and headers), written out again here so that a gateway
that drifts from it fails: a request routed to lane L sheds when L sheds its class; else a
shift may move it to T, and it sheds when T sheds its class; else it is capped at the
smaller of L's and T's caps, a cap bounding its work (max_tokens becomes at most
floor(cap / (sequences x prompts)); sequences x prompts over the cap is a 429); its `model`
becomes the serving lane's first model when that lane does not serve it. A router that
declares a gap (routers.py `Declared`: the actions its adapter lacks, and named gaps) is
expected to behave as `expect` says with that gap, never otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from lanewatch.collector.degrade.adapters.base import REWRITE_MODEL, Capability, restrict
from lanewatch.collector.degrade_state.wire import LaneDegrade

__all__ = [
    "GAPS",
    "GAPS_PROPERTY",
    "LANE_ORDER",
    "REFERENCE",
    "RESCUE_FIRST_S",
    "RETRY_AFTER_S",
    "ROWS",
    "TALLY",
    "TTFT_SLOS",
    "Declared",
    "Outcome",
    "Request",
    "Row",
    "Tally",
    "exercised",
    "expect",
    "outcomes",
    "share_bounds",
    "unmatched",
    "without_classes",
]

LANE_ORDER: Final = ("fast", "slow")  # fastest first
# The lanes' TTFT SLOs (the default spec's), which the rescue row's late first token is measured against
TTFT_SLOS: Final[Mapping[str, float]] = {"fast": 0.5, "slow": 2.0}
RESCUE_FIRST_S: Final = 3.0  # the rescue row: the slow lane's first token, past its SLO
DEFAULT_LANE: Final = "slow"
MODELS: Final[Mapping[str, tuple[str, ...]]] = {"fast": ("small", "small-x"), "slow": ("big", "big-x")}
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
TAGGED_MODELS: Final = ("small-x", "big-x")
LONG_MAX_TOKENS: Final = 1000
HUGE_PROMPT_CHARS: Final = 2000
RETRY_AFTER_S: Final = 30  # every router's config: a shed answer's Retry-After
SHIFT_N: Final = 200  # requests behind a share at a partial shift

# Named gaps: what a router may declare it cannot do, beyond its adapter's actions
# (base.py `Capability`: shift, cap_max_tokens, shed, rewrite_model).
GAPS: Final[Mapping[str, str]] = {
    "lane_by_header": "cannot choose a lane by the `x-lanewatch-lane` header",
    "lane_by_path": "cannot choose a lane by the request path",
    "lane_by_model": "cannot choose a lane by the body's `model` (cannot read the body)",
    "class_by_header": "cannot class a request by a header",
    "class_by_path": "cannot class a request by its path",
    "class_by_model": "cannot class a request by the body's `model` (cannot read the body)",
    "class_by_max_tokens": (
        "cannot class a request by its work, the body's `max_tokens` x `n` (or `best_of`) x prompts "
        "(cannot read the body)"
    ),
    "class_by_prompt_chars": "cannot class a request by its prompt's size (cannot read the body)",
    "rewrite_on_route": (
        "a request routed (not shifted) to a lane that does not serve its model is sent with "
        "the model unchanged"
    ),
    "refuses_unmatched_class": (
        "an apply that sheds a class its config has no rule for is refused (the router keeps what "
        "it held); the suite then applies the state without that class"
    ),
    "lane_headers": (
        "answers carry no `x-lanewatch-lane` or `x-lanewatch-model`, and only the router's own "
        "429 carries `x-lanewatch-degraded` (`shed`, or `cap_max_tokens` for a work over the cap)"
    ),
}
LANE_HEADER, MODEL_HEADER, DEGRADED_HEADER = "x-lanewatch-lane", "x-lanewatch-model", "x-lanewatch-degraded"


@dataclass(frozen=True)
class Declared:
    """What a router declares it cannot do: its adapter's capabilities, and named gaps (GAPS)."""

    capabilities: frozenset[Capability]
    gaps: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Request:
    """One request a client sends; `marker` tells the upstreams' logs of it apart."""

    name: str
    lane: str | None = None  # the x-lanewatch-lane header
    tier: str | None = None  # the x-tenant-tier header
    path: str = CHAT
    model: str = "big"
    max_tokens: int = 8
    prompt_chars: int = 2  # of each prompt
    n: int | None = None
    best_of: int | None = None
    prompts: int = 1  # more than one: a `/v1/completions` prompt list

    def sequences(self) -> int:
        """What each prompt runs: `n`, or `best_of` when larger."""
        return max(self.n or 1, self.best_of or 1)

    def units(self) -> int:
        """Sequences x prompts: what one token of max_tokens costs."""
        return self.sequences() * (self.prompts if self.path == COMPLETIONS else 1)

    def headers(self, marker: str) -> dict[str, str]:
        """The request's headers; the upstream answers at once (no token pacing)."""
        h = {"x-conformance-id": marker, "x-test-first-ms": "0", "x-test-gap-ms": "0"}
        if self.lane is not None:
            h[LANE_HEADER] = self.lane
        if self.tier is not None:
            h["x-tenant-tier"] = self.tier
        return h

    def body(self) -> dict[str, Any]:
        """The JSON body, not streamed."""
        text = "x" * self.prompt_chars
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "stream": False}
        body |= {k: v for k, v in (("n", self.n), ("best_of", self.best_of)) if v is not None}
        if self.path == COMPLETIONS:
            body["prompt"] = text if self.prompts == 1 else [text] * self.prompts
        else:
            body["messages"] = [{"role": "user", "content": text}]
        return body


@dataclass(frozen=True)
class Outcome:
    """What the user sees of one request: status, the upstream that served it and what it was asked."""

    status: int
    lane: str | None  # None: no upstream saw it (shed)
    model: str | None
    max_tokens: int | None
    headers: tuple[tuple[str, str], ...]  # the x-lanewatch-* response headers, sorted

    def describe(self) -> str:
        """One line for a failure message."""
        served = f"{self.lane} as {self.model!r} max_tokens={self.max_tokens}" if self.lane else "no upstream"
        return f"{self.status} {served} {dict(self.headers)}"


@dataclass(frozen=True)
class Row:
    """A degrade state held by the router (after the `before` states were applied) and its requests."""

    name: str
    what: str
    state: Mapping[str, LaneDegrade]
    requests: tuple[Request, ...]
    before: tuple[Mapping[str, LaneDegrade], ...] = ()
    repeat: int = 1  # each request sent this many times: a partial shift's share
    share_at_fast: float | None = None  # the share of a partial shift's requests served by fast

    def requests_sent(self) -> int:
        """How many requests the row sends."""
        return len(self.requests) * self.repeat


def share_bounds(n: int, p: float, sigmas: float = 5.0) -> tuple[float, float]:
    """The share of `n` independent draws at probability `p` that lies within `sigmas` binomial
    standard deviations (5: outside it about once in 1.7 million rows)."""
    margin = sigmas * math.sqrt(p * (1 - p) / n)
    return max(0.0, p - margin), min(1.0, p + margin)


def lane_of(req: Request, gaps: frozenset[str]) -> str:
    """The lane a request is routed to: header, path, model, else the default lane."""
    if req.lane is not None and "lane_by_header" not in gaps:
        return req.lane
    if req.path == COMPLETIONS and "lane_by_path" not in gaps:
        return "fast"
    if req.model in MODELS["fast"] and "lane_by_model" not in gaps:
        return "fast"
    return DEFAULT_LANE


def class_of(req: Request, gaps: frozenset[str]) -> str:
    """The request's class: the first rule that matches (header, model, work, prompt, path)."""
    chars = req.prompt_chars * (req.prompts if req.path == COMPLETIONS else 1)
    rules = [
        ("class_by_header", req.tier == "batch", "batch"),
        ("class_by_model", req.model in TAGGED_MODELS, "tagged"),
        ("class_by_max_tokens", req.max_tokens * req.units() >= LONG_MAX_TOKENS, "long"),
        ("class_by_prompt_chars", chars >= HUGE_PROMPT_CHARS, "huge"),
        ("class_by_path", req.path == COMPLETIONS, "bulk"),
        ("class_by_path", req.path == CHAT, "chat"),
    ]
    for gap, matches, name in rules:
        if matches and gap not in gaps:
            return name
    return "interactive"


def expect(
    state: Mapping[str, LaneDegrade], req: Request, declared: Declared, *, shifted: bool = True
) -> Outcome:
    """What `req` gets from a router that declares `declared`, holding `state` as its adapter
    applies it (`restrict`); `shifted`: whether a partial shift's draw moved this one."""
    held, _ = restrict(state, declared.capabilities)
    gaps = declared.gaps
    lane, cls = lane_of(req, gaps), class_of(req, gaps)
    own = held.get(lane, LaneDegrade())
    there = LaneDegrade()  # the lane a shift moved it to, when it moved
    served, actions = lane, []
    shed = cls in own.shed_classes
    if shed:
        actions.append("shed")
    else:
        moves = "shift" in own.active() and own.shift_to is not None
        if moves and (own.shift_percent >= 100 or (own.shift_percent > 0 and shifted)):
            served = own.shift_to or lane
            actions.append("shift")
        there = held.get(served, LaneDegrade()) if served != lane else LaneDegrade()
        if cls in there.shed_classes:
            shed = True
            actions.append("shed")
    if shed:
        marks = {LANE_HEADER: served, DEGRADED_HEADER: ",".join(actions)}
        if "lane_headers" in gaps:
            marks = {DEGRADED_HEADER: "shed"}
        return Outcome(429, None, None, None, tuple(sorted(marks.items())))
    caps = [d.cap_max_tokens for d in (own, there) if d.cap_max_tokens is not None]
    max_tokens = req.max_tokens
    if caps and req.units() > min(caps):  # one token a sequence is already over the cap: refused
        actions.append("cap_max_tokens")
        marks = {LANE_HEADER: served, DEGRADED_HEADER: ",".join(actions)}
        if "lane_headers" in gaps:
            marks = {DEGRADED_HEADER: "cap_max_tokens"}
        return Outcome(429, None, None, None, tuple(sorted(marks.items())))
    if caps and max_tokens > min(caps) // req.units():
        max_tokens = min(caps) // req.units()
        actions.append("cap_max_tokens")
    rewrites = REWRITE_MODEL in declared.capabilities if served != lane else "rewrite_on_route" not in gaps
    model = req.model
    if model not in MODELS[served] and rewrites:
        model = MODELS[served][0]
    headers = {LANE_HEADER: served, MODEL_HEADER: f"{req.model} -> {model}"}
    if actions:
        headers[DEGRADED_HEADER] = ",".join(actions)
    return Outcome(
        200, served, model, max_tokens, tuple(sorted(() if "lane_headers" in gaps else headers.items()))
    )


def outcomes(row: Row, req: Request, declared: Declared) -> frozenset[Outcome]:
    """Each outcome `req` may have in `row`: two at a partial shift (moved or not), else one."""
    return frozenset(expect(row.state, req, declared, shifted=s) for s in (True, False))


def exercised(row: Row, declared: Declared) -> frozenset[str]:
    """The declared gaps and missing actions that change what some request of `row` gets.

    A gap is exercised when declaring all but it would expect another outcome of some request.
    """
    missing = frozenset(c for c in ALL_CAPABILITIES if c not in declared.capabilities)
    found = set()
    for gap in sorted(declared.gaps):
        without = replace(declared, gaps=declared.gaps - {gap})
        if any(outcomes(row, r, without) != outcomes(row, r, declared) for r in row.requests):
            found.add(gap)
    if "refuses_unmatched_class" in declared.gaps and any(
        unmatched(s, declared) for s in (*row.before, row.state)
    ):
        found.add("refuses_unmatched_class")
    for cap in sorted(missing):
        more = replace(declared, capabilities=declared.capabilities | {cap})
        if any(outcomes(row, r, more) != outcomes(row, r, declared) for r in row.requests):
            found.add(cap)
    return frozenset(found)


ALL_CAPABILITIES: Final[tuple[Capability, ...]] = ("shift", "cap_max_tokens", "shed", REWRITE_MODEL)
REFERENCE: Final = Declared(frozenset(ALL_CAPABILITIES))

# Requests that pick each lane each way, and match each class each way.
DEFAULT = Request("default")
TO_FAST = Request("header fast", lane="fast", model="small")
TO_SLOW = Request("header slow", lane="slow")
BY_PATH = Request("path /v1/completions", path=COMPLETIONS, model="small")
BY_MODEL = Request("model small", model="small")
LANE_WAYS: Final = {"default": DEFAULT, "header": TO_FAST, "path": BY_PATH, "model": BY_MODEL}


def _classed(base: Request, way: str) -> Request:
    """`base` made to match the class rule of `way` (and no earlier one)."""
    name = f"{base.name}, class by {way}"
    if way == "header":
        return replace(base, name=name, tier="batch")
    if way == "model":  # a tagged model of the lane the request picks, so no rewrite interferes
        tagged = "small-x" if base.model in MODELS["fast"] else "big-x"
        return replace(base, name=name, model=tagged)
    if way == "max_tokens":
        return replace(base, name=name, max_tokens=LONG_MAX_TOKENS)
    if way == "prompt_chars":
        return replace(base, name=name, prompt_chars=HUGE_PROMPT_CHARS + 400)
    return replace(base, name=name, path=COMPLETIONS)  # path


CLASS_WAYS: Final = {
    "header": "batch",
    "model": "tagged",
    "max_tokens": "long",
    "prompt_chars": "huge",
    "path": "bulk",
}
# The gap that leaves each class unset; `chat` is a second class by path, on the other path.
CLASS_GAP: Final = {**{cls: f"class_by_{way}" for way, cls in CLASS_WAYS.items()}, "chat": "class_by_path"}


def unmatched(state: Mapping[str, LaneDegrade], declared: Declared) -> frozenset[str]:
    """The classes `state` sheds that a router with `declared` never gives a request."""
    shed = {c for spec in state.values() for c in spec.shed_classes}
    return frozenset(c for c in shed if CLASS_GAP.get(c) in declared.gaps)


def without_classes(state: Mapping[str, LaneDegrade], classes: frozenset[str]) -> dict[str, LaneDegrade]:
    """`state` shedding none of `classes` (a lane left with no action dropped)."""
    out = {}
    for lane, spec in state.items():
        spec = replace(spec, shed_classes=tuple(c for c in spec.shed_classes if c not in classes))
        if spec.active():
            out[lane] = spec
    return out


def _class_row(way: str) -> Row:
    cls = CLASS_WAYS[way]
    reqs = [
        LANE_WAYS[lane] for lane in LANE_WAYS if not (way == "path" and lane == "path")
    ]  # the path is bulk
    reqs += [_classed(base, way) for base in LANE_WAYS.values()]
    return Row(
        f"class-by-{way.replace('_', '-')}",
        f"fast sheds `{cls}` (class by {way.replace('_', ' ')}); each way of choosing a lane, with and "
        "without the class",
        {"fast": LaneDegrade(shed_classes=(cls,))},
        tuple(dict.fromkeys(reqs)),
    )


SLOW_TO_FAST = LaneDegrade(shift_to="fast", shift_percent=100)
WORK_CAP: Final = 64
# Short answers that add up: each a work of LONG_MAX_TOKENS or more, none with max_tokens that high.
HIDDEN_WORK: Final = (
    replace(TO_FAST, name="header fast, n 16 x 100", n=16, max_tokens=100),
    replace(BY_PATH, name="path /v1/completions, best_of 20 x 100", best_of=20, max_tokens=100),
    replace(BY_PATH, name="path /v1/completions, 50 prompts x 100", prompts=50, max_tokens=100),
    replace(BY_MODEL, name="model small, n 2 x best_of 10 x 100", n=2, best_of=10, max_tokens=100),
)
SMALL_WORK: Final = (
    replace(TO_FAST, name="header fast, n 2 x 8", n=2),
    replace(BY_PATH, name="path /v1/completions, 4 prompts x 8", prompts=4),
)
TWO_LANE = {"slow": SLOW_TO_FAST, "fast": LaneDegrade(cap_max_tokens=3, shed_classes=("batch",))}
UNDEGRADED_REQUESTS = (
    DEFAULT,
    TO_FAST,
    TO_SLOW,
    BY_PATH,
    BY_MODEL,
    Request("header fast, model big", lane="fast"),
    Request("header slow, model small", lane="slow", model="small"),
    Request("path /v1/completions, model big", path=COMPLETIONS),
)

ROWS: Final[tuple[Row, ...]] = (
    Row("undegraded", "no degrade: each way of choosing a lane", {}, UNDEGRADED_REQUESTS),
    Row(
        "shift-0",
        "slow shifts 0 % to fast",
        {"slow": LaneDegrade(shift_to="fast", shift_percent=0)},
        (DEFAULT, Request("model big-x", model="big-x")),
    ),
    Row(
        "shift-50",
        f"slow shifts 50 % to fast: of {SHIFT_N} requests, fast serves 50 % within 5 binomial sigmas",
        {"slow": LaneDegrade(shift_to="fast", shift_percent=50)},
        (DEFAULT,),
        repeat=SHIFT_N,
        share_at_fast=0.5,
    ),
    Row(
        "shift-100",
        "slow shifts 100 % to fast: the model rewritten to fast's",
        {"slow": SLOW_TO_FAST},
        (DEFAULT, Request("model big-x", model="big-x"), TO_FAST),
    ),
    Row(
        "cap",
        "slow caps max_tokens at 3",
        {"slow": LaneDegrade(cap_max_tokens=3)},
        (DEFAULT, Request("max_tokens 2", max_tokens=2), TO_FAST),
    ),
    Row(
        "cap-work",
        f"slow caps at {WORK_CAP}: the cap bounds n x max_tokens and a prompt list's work; n beyond the cap "
        "is refused",
        {"slow": LaneDegrade(cap_max_tokens=WORK_CAP)},
        (
            replace(DEFAULT, name="n 64 x 64", n=64, max_tokens=64),
            replace(DEFAULT, name="n 4 x 100", n=4, max_tokens=100),
            replace(DEFAULT, name="n 4 x 8", n=4),
            Request(
                "header slow, /v1/completions, 8 prompts x 100",
                lane="slow",
                path=COMPLETIONS,
                prompts=8,
                max_tokens=100,
            ),
            replace(DEFAULT, name="n 65 x 1", n=65, max_tokens=1),
        ),
    ),
    Row(
        "shed-fastest",
        "fast (the fastest lane) sheds `batch`",
        {"fast": LaneDegrade(shed_classes=("batch",))},
        (_classed(TO_FAST, "header"), TO_FAST, _classed(DEFAULT, "header")),
    ),
    Row(
        "two-lane",
        "slow shifts 100 % to fast while fast sheds `batch` and caps at 3: a shifted request obeys "
        "the serving lane's shed and cap",
        TWO_LANE,
        (_classed(DEFAULT, "header"), DEFAULT, _classed(TO_FAST, "header"), TO_FAST),
    ),
    Row(
        "two-lane-work",
        "slow shifts 100 % to fast while fast sheds `long`: a shifted request whose work is long "
        "(n 16 x 100) obeys the serving lane's shed; a short one is served by fast",
        {"slow": SLOW_TO_FAST, "fast": LaneDegrade(shed_classes=("long",))},
        (replace(DEFAULT, name="n 16 x 100", n=16, max_tokens=100), replace(DEFAULT, name="n 2 x 8", n=2)),
    ),
    *(_class_row(way) for way in CLASS_WAYS),
    Row(
        "class-by-work",
        "fast sheds `long`: a work of 1000 tokens or more hidden in `n`, `best_of` or a prompt list of "
        "short answers is shed as `long`; small ones are served",
        {"fast": LaneDegrade(shed_classes=("long",))},
        (*HIDDEN_WORK, *SMALL_WORK),
    ),
    Row(
        "class-by-path-chat",
        "fast sheds `chat` (class by the path /v1/chat/completions), while fast is also chosen by "
        "another path (/v1/completions)",
        {"fast": LaneDegrade(shed_classes=("chat",))},
        tuple(LANE_WAYS.values()),
    ),
    Row(
        "restore",
        "the two-lane state, then no degrade: served as undegraded",
        {},
        (_classed(DEFAULT, "header"), DEFAULT, _classed(TO_FAST, "header"), TO_FAST),
        before=(TWO_LANE,),
    ),
)


@dataclass
class Tally:
    """The gaps each router showed, per row, for the session's summary."""

    seen: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    shares: dict[str, dict[str, float]] = field(default_factory=dict)  # of a partial shift's rows

    def add(self, router: str, row: str, gaps: frozenset[str], share_at_fast: float) -> None:
        """Record the gaps `router` showed on `row` (possibly none), and the share fast served."""
        self.seen.setdefault(router, {})[row] = gaps
        self.shares.setdefault(router, {})[row] = share_at_fast

    def lines(self) -> list[str]:
        """The summary: per router, the rows run and each gap with the rows that showed it."""
        out = []
        for router, rows in sorted(self.seen.items()):
            by_gap: dict[str, list[str]] = {}
            for row, gaps in rows.items():
                for gap in gaps:
                    by_gap.setdefault(gap, []).append(row)
            gaps_text = "; ".join(f"{g} ({', '.join(sorted(r))})" for g, r in sorted(by_gap.items()))
            partial = [r.name for r in ROWS if r.share_at_fast is not None and r.name in rows]
            shares = "".join(f"; {r}: fast served {self.shares[router][r]:.3f}" for r in partial)
            out.append(f"{router}: {len(rows)} rows{shares}; declared gaps seen: {gaps_text or 'none'}")
        return out


TALLY = Tally()
GAPS_PROPERTY: Final = "conformance_gaps"  # the test report's property: [router, row, [gap, ...]]
