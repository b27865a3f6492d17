"""The gateway in front of two `lanewatch sim` lanes (one over HTTPS), driven by the real openai client."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from tests.servers import SimHandle, start_simulator

from .gateway_harness import TRUST_LOOPBACK, gateway_server

pytestmark = pytest.mark.integration
HELLO: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Hello there, how are you?"}]


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, SimHandle]]:
    tmp = tmp_path_factory.mktemp("sims")
    with start_simulator(tmp, profile="fast", tls=True) as fast, start_simulator(tmp, profile="slow") as slow:
        yield fast, slow


async def test_openai_client_streams_through_the_gateway(sims: tuple[SimHandle, SimHandle]) -> None:
    fast, slow = sims
    assert fast.cert_path is not None
    lanes = {"fast": {"upstreams": [fast.url], "cacert": str(fast.cert_path)}, "slow": [slow.url]}
    async with gateway_server(lanes, hints=TRUST_LOOPBACK) as g:
        client = openai.AsyncOpenAI(base_url=f"{g.url}/v1", api_key="unused", max_retries=0)
        pieces, usages = [], []
        stream = await client.chat.completions.create(
            model=fast.model,
            messages=HELLO,
            max_tokens=12,
            stream=True,
            extra_headers={"x-lanewatch-lane": "fast", "x-request-id": f"gw-{uuid.uuid4().hex}"},
            extra_body={"ignore_eos": True},
        )
        assert stream.response.headers["x-lanewatch-lane"] == "fast"
        async for chunk in stream:
            usages.append(chunk.usage)
            pieces += [c.delta.content for c in chunk.choices if c.delta.content]
        asked = await client.chat.completions.create(
            model=slow.model,
            messages=HELLO,
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        usage = [chunk.usage async for chunk in asked if chunk.usage is not None]
        async with aiohttp.ClientSession() as s, s.get(f"{g.url}/v1/models") as r:
            models = {m["id"] for m in (await r.json())["data"]}
        await client.close()
    assert len(pieces) == 12
    assert usages and all(u is None for u in usages)  # the gateway's own usage request stays hidden
    assert len(usage) == 1 and usage[0].completion_tokens == 5  # asked for: passed on
    assert models == {fast.model, slow.model}
    first, second = g.records
    assert (first.lane, first.output_tokens, first.tokens_from_usage, first.error) == ("fast", 12, True, None)
    assert (
        first.tls_s is not None and first.tls_s > 0 and first.connect_s is not None
    )  # a new HTTPS connection
    assert (second.lane, second.output_tokens, second.tls_s) == ("slow", 5, 0.0)  # plain HTTP
    truth = fast.truth(first.request_id or "")
    assert truth["output_tokens"] == 12 and truth["trace_id"] == first.trace_id  # joined by trace id
    assert first.ttft_s is not None and first.ttft_s >= truth["ttft_s"]  # the client waits for the server
