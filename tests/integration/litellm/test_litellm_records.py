"""Every request a real LiteLLM proxy serves reaches a real collector as one record of source `litellm`.

Two `lanewatch sim` lanes behind the proxy (model groups `fast` and `slow`, and `spare`, which the
lane map leaves out), lanewatch's handler loaded from the proxy's config, the collector's ingest
behind a token. Each streamed request's record must carry its lane, model, deployment and tokens,
and a TTFT inside the client's (timed from the proxy's arrival stamp to LiteLLM's first chunk, so
the client's own network and the proxy's forwarding of that chunk are outside it); an upstream's
404 is one record with its status and error kind.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.config import LanewatchConfig
from lanewatch.collector.record.timing import ErrorKind, RequestTiming
from tests.litellm import litellm_python, start_proxy
from tests.servers import free_port, start_simulator
from tests.waiting import eventually_async

pytestmark = pytest.mark.integration

TOKEN = "litellm-ingest-token"
MAX_TOKENS = 12
PER_GROUP = {"fast": 8, "slow": 4, "spare": 2}
# ~200 tokens in the simulator's tokenizer: sent twice, the second finds whole 16-token blocks cached
REPEATED = " ".join(f"word{i}" for i in range(200))


@asynccontextmanager
async def collector(port: int, tmp_path: Path) -> AsyncIterator[list[RequestTiming]]:
    """A collector (ingest only, behind TOKEN) serving on `port` in this loop; the records it took."""
    token_file = tmp_path / "ingest-token"
    token_file.write_text(TOKEN + "\n")
    cfg = LanewatchConfig(
        scrape={"enabled": False},
        gpu={"enabled": False},
        probe={"enabled": False},
        otlp={"join_wait_s": 0.0},
        ingest={"token_file": str(token_file)},
        server={"port": port},
        export={"records_path": str(tmp_path / "collector-records.jsonl")},
    )
    svc = CollectorService.from_config(cfg, source_factory=None)
    seen: list[RequestTiming] = []
    svc.add_listener(seen.append)
    stop, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve(svc, "127.0.0.1", port, stop, lambda _: listening.set()))
    await asyncio.wait_for(listening.wait(), 10)
    try:
        yield seen
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def chat(group: str, stream: bool = True, content: str = "hello there") -> dict[str, object]:
    """A chat request for a model group."""
    messages = [{"role": "user", "content": content}]
    return {"model": group, "max_tokens": MAX_TOKENS, "stream": stream, "messages": messages}


async def streamed(client: httpx.AsyncClient, group: str, content: str = "hello there") -> tuple[str, float]:
    """One streamed chat request for `group`: LiteLLM's call id and the client's TTFT (first content)."""
    body = chat(group, content=content)
    start = time.perf_counter()
    ttft = None
    async with client.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200, await r.aread()
        call_id = r.headers["x-litellm-call-id"]
        async for line in r.aiter_lines():
            if ttft is None and '"content":"' in line.replace(" ", "") and '"content":""' not in line:
                ttft = time.perf_counter() - start
    assert ttft is not None
    return call_id, ttft


async def test_every_request_is_one_litellm_record_with_the_clients_ttft(tmp_path: Path) -> None:
    litellm_python()
    port = free_port()
    with (
        start_simulator(tmp_path, profile="fast", model="fast", enable_prompt_tokens_details=True) as fast,
        start_simulator(tmp_path, profile="slow", model="slow") as slow,
    ):
        upstreams = {
            "fast": (fast.url, "fast"),
            "slow": (slow.url, "slow"),
            "spare": (fast.url, "fast"),
            "gone": (fast.url, "no-such-model"),  # the upstream answers 404
        }
        settings = {
            "collector_url": f"http://127.0.0.1:{port}",
            "token_file": str(tmp_path / "ingest-token"),
            "lanes": {"fast": "fast", "slow": "slow"},
            "interval_s": 0.2,
        }
        async with collector(port, tmp_path) as seen:
            with start_proxy(tmp_path / "litellm", upstreams, settings) as proxy:
                client_ttft: dict[str, tuple[str, float]] = {}
                async with httpx.AsyncClient(base_url=proxy.url, timeout=60) as client:
                    await streamed(client, "fast")  # the first call warms LiteLLM's imports
                    for group, n in PER_GROUP.items():
                        for _ in range(n):
                            call_id, ttft = await streamed(client, group)
                            client_ttft[call_id] = (group, ttft)
                    gone = await client.post("/v1/chat/completions", json=chat("gone", stream=False))
                    assert gone.status_code == 404
                    repeats = [(await streamed(client, "fast", REPEATED))[0] for _ in range(2)]
                total = sum(PER_GROUP.values()) + 4
                await eventually_async(
                    lambda: len(seen) >= total, 30, f"{total} records from LiteLLM ({proxy.log_path})"
                )
                await asyncio.sleep(0.5)  # nothing more arrives: one record per request
    assert len(seen) == total
    (failed,) = [r for r in seen if r.model == "gone"]
    assert (failed.lane, failed.status, failed.error, failed.output_tokens) == (
        "unrouted",
        404,
        ErrorKind.HTTP_4XX,
        None,
    )
    assert failed.error_message and "no-such-model" in failed.error_message
    by_id = {r.request_id: r for r in seen}
    # The upstream's usage reaches the record whole: vLLM's prompt_tokens_details.cached_tokens
    # (absent on a cold cache) through LiteLLM's usage object.
    first, again = (by_id[call_id] for call_id in repeats)
    assert first.cached_prompt_tokens is None and first.prompt_tokens is not None
    assert again.cached_prompt_tokens is not None and again.prompt_tokens == first.prompt_tokens
    assert 0 < again.cached_prompt_tokens <= again.prompt_tokens and again.cached_prompt_tokens % 16 == 0
    gaps = []
    for call_id, (group, ttft) in client_ttft.items():
        r = by_id[call_id]
        assert (r.source, r.target, r.model, r.api, r.status, r.error) == (
            "litellm",
            "litellm",
            group,
            "chat",
            200,
            None,
        )
        assert r.lane == {"fast": "fast", "slow": "slow"}.get(group, "unrouted")
        assert r.attrs.get("deployment") == f"{group}-deployment"
        assert (r.output_tokens, r.tokens_from_usage) == (MAX_TOKENS, True)
        assert r.ttft_s is not None and r.e2e_s is not None and 0 < r.ttft_s <= r.e2e_s
        # the record's interval lies inside the client's (2 ms: its wall clock against perf_counter)
        assert r.ttft_s <= ttft + 0.002
        gaps.append(ttft - r.ttft_s)
    print(
        f"client TTFT - record TTFT: median {statistics.median(gaps) * 1000:.2f} ms,"
        f" max {max(gaps) * 1000:.2f} ms"
    )
    # What the proxy does that LiteLLM stamps no time for: taking the connection and the body before
    # auth, and forwarding the first chunk (about 25 ms median on the loaded 2-core machine; the
    # bound is generous so load cannot break it).
    assert statistics.median(gaps) < 0.1, gaps
