"""Each fault, as a client sees it; the admin API's auth and validation; start-up faults."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers import SimHandle, start_simulator
from tests.waiting import eventually

pytestmark = pytest.mark.integration

MESSAGES = [{"role": "user", "content": "Tell me something."}]


@pytest.fixture(scope="module")
def sim_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with start_simulator(tmp_path_factory.mktemp("faults"), profile="fast") as handle:
        yield handle


@pytest.fixture
def sim(sim_module: SimHandle) -> Iterator[SimHandle]:
    yield sim_module
    with sim_module.client() as c:
        c.delete("/admin/faults", headers=sim_module.admin_headers).raise_for_status()


def set_faults(sim: SimHandle, body: dict[str, Any]) -> None:
    with sim.client() as c:
        r = c.post("/admin/faults", json=body, headers=sim.admin_headers)
    assert r.status_code == 200, r.text
    assert r.json()["faults"] | body == r.json()["faults"]


def chat(max_tokens: int = 8, **extra: Any) -> dict[str, Any]:
    return {"model": "meta-llama/Llama-3.2-1B-Instruct", "messages": MESSAGES, "max_tokens": max_tokens,
            "ignore_eos": True, **extra}  # fmt: skip


def stream_lines(sim: SimHandle, body: dict[str, Any], rid: str) -> list[tuple[float, str]]:
    """(seconds since the request started, line) for each `data:` line until the stream ends."""
    out: list[tuple[float, str]] = []
    start = time.perf_counter()
    with sim.client() as c, c.stream("POST", "/v1/chat/completions", json={**body, "stream": True},
                                     headers={"x-request-id": rid}) as r:  # fmt: skip
        assert r.status_code == 200
        try:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    out.append((time.perf_counter() - start, line[6:]))
        except httpx.RemoteProtocolError:
            out.append((time.perf_counter() - start, "<cut>"))
    return out


def content_times(lines: list[tuple[float, str]]) -> list[float]:
    times = []
    for t, data in lines:
        if data in ("[DONE]", "<cut>"):
            continue
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError:
            continue
        if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
            times.append(t)
    return times


@pytest.mark.parametrize("status", [429, 500, 503])
def test_error_rate_answers_with_that_status(sim: SimHandle, status: int) -> None:
    set_faults(sim, {"error_rates": {str(status): 1.0}})
    with sim.client() as c:
        r = c.post("/v1/chat/completions", json=chat(), headers={"x-request-id": f"err-{status}"})
    assert r.status_code == status
    assert r.json()["error"]["code"] == status
    assert (r.headers.get("retry-after") == "1") == (status == 429)
    assert sim.truth(f"err-{status}")["http_status"] == status


def test_queue_delay_shows_in_ttft_and_queue_time(sim: SimHandle) -> None:
    set_faults(sim, {"queue_delay_s": 0.3})
    lines = stream_lines(sim, chat(), "qd-1")
    truth = sim.truth("qd-1")
    assert truth["queue_s"] >= 0.3 and truth["ttft_s"] >= 0.3
    assert content_times(lines)[0] >= 0.3


def test_decode_slowdown_raises_tpot(sim: SimHandle) -> None:
    def tpot(rid: str) -> float:
        stream_lines(sim, chat(max_tokens=40), rid)
        t = sim.truth(rid)
        return float(t["decode_s"]) / 39

    base = tpot("ds-0")
    set_faults(sim, {"decode_slowdown": 20.0})
    slow = tpot("ds-1")
    assert slow / base > 5  # 20x in the engine; a busy host stretches the short base steps most


def test_prefill_slowdown_raises_prefill(sim: SimHandle) -> None:
    def prompt(word: str) -> list[dict[str, str]]:  # different prompts: no prefix-cache hit
        return [{"role": "user", "content": f"{word} " * 3000}]

    stream_lines(sim, chat(messages=prompt("alpha")), "ps-0")
    set_faults(sim, {"prefill_slowdown": 20.0})
    stream_lines(sim, chat(messages=prompt("beta")), "ps-1")
    assert sim.truth("ps-1")["prefill_s"] > 8 * sim.truth("ps-0")["prefill_s"]


@pytest.mark.serial  # client-side stamps: a reader preempted before the pause sees it shorter
def test_stall_pauses_the_stream_midway(sim: SimHandle) -> None:
    set_faults(sim, {"stall_s": 0.5, "stall_after_tokens": 3})
    times = content_times(stream_lines(sim, chat(), "stall-1"))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) == 8
    assert times[-1] - times[0] >= 0.5  # the pause cannot be shorter than the stall
    # it sits between the 3rd and 4th content chunk (margins for a client that reads late)
    assert gaps.index(max(gaps)) == 2 and gaps[2] >= 0.3, gaps


def test_truncation_cuts_the_stream_without_done(sim: SimHandle) -> None:
    set_faults(sim, {"truncate_after_tokens": 3})
    lines = stream_lines(sim, chat(), "cut-1")
    assert len(content_times(lines)) == 3
    assert "[DONE]" not in [d for _, d in lines]
    assert sim.truth("cut-1")["finished_reason"] == "abort"


def test_malformed_chunk_is_not_json_and_the_stream_goes_on(sim: SimHandle) -> None:
    set_faults(sim, {"malformed_after_tokens": 2})
    lines = [d for _, d in stream_lines(sim, chat(), "bad-sse-1")]
    broken = []
    for d in lines[:-1]:
        try:
            json.loads(d)
        except json.JSONDecodeError:
            broken.append(d)
    assert len(broken) == 1 and lines[-1] == "[DONE]"


def test_refused_connections_then_back(sim: SimHandle) -> None:
    set_faults(sim, {"refuse_connections_s": 0.6})
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{sim.url}/health", timeout=2)
    # Back once the 0.6 s are over: polled with a deadline, as a loaded host may reopen late.

    def healthy() -> bool:
        try:
            return httpx.get(f"{sim.url}/health", timeout=2).status_code == 200
        except httpx.ConnectError:
            return False

    eventually(healthy, 10, "the sim answers again after a 0.6 s refusal")


def test_admin_needs_the_token_and_a_valid_body(sim: SimHandle) -> None:
    with sim.client() as c:
        assert c.get("/admin/faults").status_code == 401
        assert c.get("/admin/faults", headers={"authorization": "Bearer wrong"}).status_code == 401
        r = c.post("/admin/faults", json={"decode_slowdown": -2, "bogus": 1}, headers=sim.admin_headers)
        assert r.status_code == 400
        assert "decode_slowdown" in r.json()["error"]["message"] and "bogus" in r.json()["error"]["message"]
        shown = c.get("/admin/faults", headers=sim.admin_headers).json()["faults"]
        assert shown["decode_slowdown"] == 1.0  # nothing changed


def test_faults_from_the_command_line(tmp_path: Path) -> None:
    with start_simulator(tmp_path, faults={"error_rates": {"503": 1.0}}) as sim, sim.client() as c:
        assert c.post("/v1/chat/completions", json=chat()).status_code == 503
        c.delete("/admin/faults", headers=sim.admin_headers).raise_for_status()
        assert c.post("/v1/chat/completions", json=chat()).status_code == 200
