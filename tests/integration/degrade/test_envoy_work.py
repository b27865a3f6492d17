"""A shed and a cap by work through the real Envoy: its Lua script reads a body's work as the gateway does.

The route template defines `long` by work (`{work: {min: 1000}}`) and the fast lane sheds it. Each
body is read twice: by Envoy's script (what the client gets) and by lanewatch's own reading
(collector/openai_api/request_reading.py), and the two must agree: 429 when the work is 1000 or
more, 400 when a count is one vLLM refuses, else served.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lanewatch.collector.degrade.adapters.envoy import EnvoySettings
from lanewatch.collector.degrade_state.state import WorkOverCap, cap_max_tokens
from lanewatch.collector.degrade_state.wire import LaneDegrade
from lanewatch.collector.openai_api.request_reading import ReadingError, read_work

from .traffic import router_setup

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
LONG = 1000
WORK_CLASS = f"""
  long:
    work: {{min: {LONG}}}
"""


def _chat(**fields: Any) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], **fields}).encode()


def _done(**fields: Any) -> bytes:
    return json.dumps({"model": "m", "prompt": "hi", **fields}).encode()


BODIES: list[tuple[str, bytes]] = [
    (CHAT, _chat(max_tokens=999)),
    (CHAT, _chat(max_tokens=1000)),
    (CHAT, _chat(max_tokens=100, n=16)),
    (CHAT, _chat(max_tokens=100, n="16")),
    (CHAT, _chat(max_tokens=100, n=" 1_6 ")),
    (CHAT, _chat(max_tokens=100, n=16.0)),
    (CHAT, _chat(max_tokens=100, n="9.0")),
    (CHAT, _chat(max_tokens=100, best_of=20)),
    (CHAT, _chat(max_tokens=2, n=2, best_of=300)),
    (CHAT, _chat(max_tokens=499, n=2)),
    (CHAT, _chat(max_tokens=500, n=2)),
    (CHAT, _chat(max_tokens=5000, max_completion_tokens=10)),
    (CHAT, _chat(max_tokens=None, max_completion_tokens=999)),
    (CHAT, _chat(max_tokens=True, n=999)),  # pydantic reads a bool bound as 1
    (CHAT, _chat()),  # no bound: up to the context length
    (CHAT, _chat(max_tokens=10, n=True)),
    (CHAT, _chat(max_tokens=10, n=0)),
    (CHAT, _chat(max_tokens=10, n=2.5)),
    (CHAT, _chat(max_tokens=10, best_of="many")),
    (CHAT, _chat(max_tokens=1000.5)),
    (CHAT, b'{"model": "m", "messages": [], "max_tokens": 10, "max_tokens": 2000}'),  # the last counts
    (CHAT, b'{"model": "m", "messages": [], "max\\u005ftokens": 2000}'),
    (CHAT, _chat(extra={"max_tokens": 5000, "n": 99}, max_tokens=10)),  # only top-level keys count
    (COMPLETIONS, _done(max_tokens=100, prompt=["a"] * 50)),
    (COMPLETIONS, _done(max_tokens=100, prompt=["a"] * 9)),
    (COMPLETIONS, _done(max_tokens=500, prompt=[[1, 2], [3]])),
    (COMPLETIONS, _done(max_tokens=999, prompt=[1, 2, 3])),
    (COMPLETIONS, _done()),  # vLLM's default 16
    (COMPLETIONS, _done(prompt=["a"] * 63)),  # 63 x 16
    (COMPLETIONS, _done(prompt=["a"] * 63, n=2)),  # 2016
    (COMPLETIONS, _done(prompt=["a", "b"], n=None)),  # completions refuse a null n
    (COMPLETIONS, _done(max_tokens=400, prompt="x", prompt_embeds=["AAAA", "AAAA"])),  # 3 prompts
    (COMPLETIONS, _done(max_tokens=100, n=2, best_of=10)),
]


def _reference(path: str, body: bytes) -> int:
    """What the gateway's reading says the request gets while `long` is shed."""
    try:
        work = read_work(json.loads(body), "completions" if path == COMPLETIONS else "chat", 1_000_000).total
    except ReadingError:
        return 400
    return 429 if work >= LONG else 200


async def test_envoy_sheds_by_work_as_the_gateway_reads_it(tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path) as (ups, router, adapter, s):
        assert isinstance(router.settings, EnvoySettings)
        template = router.settings.route_template
        text = template.read_text()
        template.write_text(text.replace("classes:\n", "classes:" + WORK_CLASS, 1))
        await adapter.apply({"fast": LaneDegrade(shed_classes=("long",))}, 1)
        view = await adapter.read_back()
        assert view is not None and view.lanes == {"fast": LaneDegrade(shed_classes=("long",))}
        got, want = [], []
        for path, body in BODIES:
            async with s.post(
                router.url + path, data=body, headers={"content-type": "application/json"}
            ) as r:
                await r.read()
                got.append((path, body.decode(), r.status, r.headers.get("x-lanewatch-degraded")))
            expected = _reference(path, body)
            want.append((path, body.decode(), expected, "shed" if expected == 429 else None))
        assert got == want
        assert {429, 400, 200} <= {status for _, _, status, _ in got}  # each outcome is in the table
        served = [log.body for log in ups["fast"].requests.values()]
        assert len(served) == sum(1 for _, _, status, _ in want if status == 200)
        # a body that is no JSON object goes on unshed: vLLM answers it 400 without work
        async with s.post(router.url + CHAT, data=b"[1, 2]") as r:
            await r.read()
        assert len(ups["fast"].requests) == len(served) + 1
        # the state lifted, the same bodies are served again
        await adapter.apply({}, 2)
        async with s.post(router.url + CHAT, data=_chat(max_tokens=100, n=16)) as r:
            assert r.status == 200


CAP = 64
CAPPED: list[tuple[str, bytes]] = [
    (CHAT, _chat(max_tokens=100)),
    (CHAT, _chat(max_tokens=8)),  # under the cap: sent as it came
    (CHAT, _chat(max_tokens=64, n=64)),
    (CHAT, _chat(max_tokens=100, n=4)),
    (CHAT, _chat(n=3)),  # no bound: max_tokens set
    (CHAT, _chat(max_tokens=None, n=2)),
    (CHAT, _chat(max_completion_tokens=100, max_tokens=50, n=2)),
    (CHAT, _chat(max_completion_tokens=10, max_tokens=500)),
    (CHAT, _chat(max_tokens="100", best_of=4)),
    (CHAT, _chat(max_tokens=1, n=65)),  # 65 sequences: over the cap at one token each
    (CHAT, b'{"model":"m","messages":[] ,"max_tokens":100 , "n" : 2 }'),
    (CHAT, b'{"model": "m", "messages": [], "max_tokens": 10, "max_tokens": 2000}'),
    (COMPLETIONS, _done(prompt=["a"] * 8)),  # the default 16 each: 128
    (COMPLETIONS, _done(max_tokens=100, n=2, best_of=4)),
    (COMPLETIONS, _done(max_tokens=10, prompt=["a"] * 6)),  # 60: under the cap
    (COMPLETIONS, _done(max_tokens=100, max_completion_tokens="x")),  # vLLM does not read it there
]


def _capped(path: str, body: bytes) -> tuple[int, dict[str, Any] | None]:
    """What the gateway sends on (or 429) under the cap: degrade_state.cap_max_tokens."""
    sent = json.loads(body)
    try:
        cap_max_tokens(sent, CAP, "completions" if path == COMPLETIONS else "chat")
    except WorkOverCap:
        return 429, None
    return 200, sent


async def test_envoy_caps_the_work_as_the_gateway_caps_it(tmp_path: Path) -> None:
    async with router_setup("envoy", tmp_path) as (ups, router, adapter, s):
        await adapter.apply({"fast": LaneDegrade(cap_max_tokens=CAP)}, 1)
        view = await adapter.read_back()
        assert view is not None and view.lanes == {"fast": LaneDegrade(cap_max_tokens=CAP)}
        for path, body in CAPPED:
            before = len(ups["fast"].requests)
            async with s.post(
                router.url + path, data=body, headers={"content-type": "application/json"}
            ) as r:
                await r.read()
                got = (r.status, r.headers.get("x-lanewatch-degraded"))
            status, sent = _capped(path, body)
            assert got == (status, "cap_max_tokens" if status == 429 else None), body
            served = list(ups["fast"].requests.values())[before:]
            assert [log.body for log in served] == ([sent] if sent is not None else []), body
