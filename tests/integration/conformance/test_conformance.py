"""The router conformance suite: each row of rows.py against each router of routers.py.

One router process per kind serves every row (started on first use, stopped at the module's
end); each row applies its state through the router's adapter, restricted to the actions the
adapter declares, and then checks each request as a user sees it: the status, the upstream
that served it, the model and max_tokens that upstream received, and the x-lanewatch-*
response headers. A router is expected to do what the reference does less what it declares
it cannot (rows.expect); the gaps each row shows are tallied and printed at the session's end.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import aiohttp
import pytest
import pytest_asyncio

from lanewatch.collector.common.headers import RESCUED_HEADER
from lanewatch.collector.degrade.adapters.base import AdapterError, restrict
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.integration.gateway_harness import upstream_server
from tests.sse_upstream import SseUpstream

from .routers import ROUTERS, Conformant
from .rows import (
    CHAT,
    GAPS_PROPERTY,
    REFERENCE,
    RESCUE_FIRST_S,
    RETRY_AFTER_S,
    ROWS,
    TTFT_SLOS,
    Outcome,
    Request,
    Row,
    exercised,
    outcomes,
    share_bounds,
    unmatched,
    without_classes,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(180)]


@dataclass
class Fleet:
    """The two test lanes, a client, and each router kind started once, on first use."""

    stack: AsyncExitStack
    ups: dict[str, SseUpstream]
    ports: dict[str, int]
    session: aiohttp.ClientSession
    tmp: pytest.TempPathFactory
    routers: dict[str, Conformant] = field(default_factory=dict)
    revisions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    markers: itertools.count[int] = field(default_factory=itertools.count)

    async def router(self, kind: str) -> Conformant:
        """The router of `kind`, started now if it is not running yet."""
        if kind not in self.routers:
            factory = ROUTERS[kind].factory
            self.routers[kind] = await self.stack.enter_async_context(
                factory(self.tmp.mktemp(kind), self.ports)
            )
        return self.routers[kind]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def fleet(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Fleet]:
    """The routers and lanes every row of this module shares."""
    async with AsyncExitStack() as stack:
        ups, ports = {}, {}
        for lane in ("fast", "slow"):
            up, url = await stack.enter_async_context(upstream_server(first_ms=0, gap_ms=0))
            ups[lane], ports[lane] = up, int(url.rsplit(":", 1)[1])
        # A new connection per request: an idle kept-alive connection that nginx's old worker
        # closes on reload can race a request sent on it (a client-side race of any reload).
        connector = aiohttp.TCPConnector(force_close=True, limit=20)
        session = await stack.enter_async_context(aiohttp.ClientSession(connector=connector))
        yield Fleet(stack, ups, ports, session, tmp_path_factory)


async def observe(fleet: Fleet, router: Conformant, req: Request) -> Outcome:
    """Send `req` through `router`; what the user sees of it, and what the upstream received."""
    marker = f"c{next(fleet.markers)}"
    async with fleet.session.post(
        f"{router.url}{req.path}", json=req.body(), headers=req.headers(marker)
    ) as r:
        await r.read()
        status, headers = r.status, r.headers
    marks = tuple(sorted((k.lower(), v) for k, v in headers.items() if k.lower().startswith("x-lanewatch-")))
    if status == 429:
        assert headers.get("Retry-After") == str(RETRY_AFTER_S), f"{req.name}: a shed answer's Retry-After"
    seen = [
        (lane, log.body)
        for lane, up in fleet.ups.items()
        for log in up.requests.values()
        if {k.lower(): v for k, v in log.headers.items()}.get("x-conformance-id") == marker
    ]
    assert len(seen) <= 1, f"{req.name}: served by {len(seen)} upstreams"
    if not seen:
        return Outcome(status, None, None, None, marks)
    lane, body = seen[0]
    return Outcome(status, lane, body.get("model"), body.get("max_tokens"), marks)


async def apply_declared(
    router: Conformant, kept: dict[str, LaneDegrade], revision: int
) -> dict[str, LaneDegrade]:
    """Apply `kept`; where the router declares it refuses a shed of a class it cannot give, check
    that it refuses, then apply the state without those classes. The state applied."""
    classes = unmatched(kept, router.declared)
    if classes and "refuses_unmatched_class" in router.declared.gaps:
        with pytest.raises(AdapterError, match="no match rule"):
            await router.adapter.apply(kept, revision)
        kept = without_classes(kept, classes)
    await router.adapter.apply(kept, revision)
    return kept


def cases() -> list[object]:
    """(router kind, row) for every router and row, a known divergence as a strict xfail."""
    out: list[object] = []
    for kind, entry in ROUTERS.items():
        for row in ROWS:
            reason = entry.xfail.get(row.name)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(kind, row, marks=marks, id=f"{kind}-{row.name}"))
    return out


@pytest.mark.parametrize(("kind", "row"), cases())
async def test_router_serves_the_row_as_declared(
    fleet: Fleet, kind: str, row: Row, record_property: Callable[[str, object], None]
) -> None:
    router = await fleet.router(kind)
    caps = router.declared.capabilities
    for state in (*row.before, row.state):
        kept, dropped = restrict(state, caps)
        # restrict() reports exactly the actions this adapter does not declare, and nothing else
        off: set[tuple[str, str]] = {
            (lane, a) for lane, spec in state.items() for a in spec.active() if a not in caps
        }
        shifts = {lane for lane, spec in kept.items() if "shift" in spec.active()}
        off |= {(lane, "rewrite_model") for lane in shifts if "rewrite_model" not in caps}
        assert set(dropped) == off, f"{kind}: restrict() dropped {dropped}"
        kept = await apply_declared(router, kept, next(fleet.revisions))
        view = await router.adapter.read_back()
        assert view is not None and view.lanes == kept, f"{kind} holds {view}, not {kept}"
    await asyncio.sleep(router.settle_s)

    wrong: list[str] = []
    at_fast = 0
    for req in row.requests:
        allowed = outcomes(row, req, router.declared)
        got = await asyncio.gather(*(observe(fleet, router, req) for _ in range(row.repeat)))
        at_fast += sum(o.lane == "fast" for o in got)
        wrong += [
            f"{req.name}: got {o.describe()}; declared: {' or '.join(a.describe() for a in allowed)}"
            for o in dict.fromkeys(got)
            if o not in allowed
        ]
    assert not wrong, f"{kind} diverges on row {row.name} beyond what it declares:\n" + "\n".join(wrong)
    share = at_fast / row.requests_sent()
    if row.share_at_fast is not None:
        lo, hi = share_bounds(row.requests_sent(), row.share_at_fast)
        assert lo <= share <= hi, (
            f"{kind}: fast served {share:.3f} of the shifted lane, not {lo:.3f}..{hi:.3f}"
        )

    # Each way this router's outcome differs from the reference's is one it declares.
    gaps = exercised(row, router.declared)
    differs = any(outcomes(row, r, router.declared) != outcomes(row, r, REFERENCE) for r in row.requests)
    assert differs == bool(gaps), f"{kind} on {row.name}: a divergence no declared gap explains"
    assert gaps <= router.declared.gaps | {c for c in REFERENCE.capabilities if c not in caps}
    record_property(GAPS_PROPERTY, [kind, row.name, sorted(gaps), share])  # for the summary (summary.py)


@pytest.mark.parametrize("kind", list(ROUTERS))
async def test_router_rescues_a_late_first_token_as_declared(
    fleet: Fleet, kind: str, record_property: Callable[[str, object], None]
) -> None:
    """The rescue row: a streamed request on the slow lane whose first token comes past the lane's
    TTFT SLO. The reference answers it from the fast lane within the SLO and closes the slow
    attempt; a router that declares it cannot rescue serves it from the slow lane, late."""
    router = await fleet.router(kind)
    await router.adapter.apply({}, next(fleet.revisions))
    await asyncio.sleep(router.settle_s)
    marker = f"rescue{next(fleet.markers)}"
    body = {"model": "big", "max_tokens": 4, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    slow = fleet.ups["slow"]
    slow.first_ms = RESCUE_FIRST_S * 1000
    try:
        t0 = asyncio.get_running_loop().time()
        first: float | None = None
        async with fleet.session.post(
            f"{router.url}{CHAT}", json=body, headers={"x-conformance-id": marker}
        ) as r:
            status, rescued_from = r.status, r.headers.get(RESCUED_HEADER)
            async for chunk in r.content.iter_any():
                if first is None and b'"content": "t' in chunk.replace(b'"content":"t', b'"content": "t'):
                    first = asyncio.get_running_loop().time() - t0
    finally:
        slow.first_ms = 0
    logs = {
        lane: log
        for lane, up in fleet.ups.items()
        for log in up.requests.values()
        if {k.lower(): v for k, v in log.headers.items()}.get("x-conformance-id") == marker
    }
    for log in logs.values():  # the slow attempt a rescue lost is closed only past the lane's SLO
        await asyncio.wait_for(log.ended.wait(), RESCUE_FIRST_S + 2)
    assert status == 200 and first is not None, (kind, status)
    reason = ROUTERS[kind].no_rescue
    if reason is None:
        assert first < TTFT_SLOS["slow"], f"{kind}: first token after {first:.2f} s"
        assert logs["fast"].finished and logs["slow"].cancelled and not logs["slow"].finished, logs
        assert rescued_from == "slow"
    else:  # declared: it waits on the slow lane
        assert first >= RESCUE_FIRST_S and set(logs) == {"slow"} and logs["slow"].finished, (
            kind,
            first,
            logs,
        )
    record_property(GAPS_PROPERTY, [kind, "rescue", [] if reason is None else ["rescue"], 0.0])
