"""cached_prompt_tokens from `lanewatch sim --enable-prompt-tokens-details` to prober and tap records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from lanewatch.collector.probe.prober import Prober, ProbeSpec
from lanewatch.collector.probe.settings import Target
from tests.servers import SimHandle, start_simulator

from .gateway_harness import gateway_server

pytestmark = pytest.mark.integration

# ~200 tokens in the simulator's tokenizer: a dozen full 16-token blocks to find again
PROMPT = " ".join(f"word{i}" for i in range(200))


@pytest.fixture(scope="module")
def details_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with start_simulator(tmp_path_factory.mktemp("sim"), enable_prompt_tokens_details=True) as sim:
        yield sim


def _cached_of_a_repeat(first: int | None, again: int | None, prompt: int | None) -> None:
    assert first is None  # a cold cache: vLLM leaves the key out for zero cached tokens
    assert prompt is not None and again is not None
    assert 0 < again <= prompt and again % 16 == 0  # whole blocks of the prompt's prefix


async def test_the_prober_records_the_prompt_tokens_a_repeat_found_cached(details_sim: SimHandle) -> None:
    target = Target(name="sim", url=details_sim.url, model=details_sim.model)
    spec = ProbeSpec("repeat", "chat", 4, prompt="prober " + PROMPT)
    async with Prober(target) as prober:
        first = await prober.probe(spec)
        again = await prober.probe(spec)
    assert first.error is None and again.error is None
    _cached_of_a_repeat(first.cached_prompt_tokens, again.cached_prompt_tokens, again.prompt_tokens)


@pytest.mark.parametrize("stream", [True, False])
async def test_the_tap_records_them_streamed_or_not(details_sim: SimHandle, stream: bool) -> None:
    body = {
        "model": details_sim.model, "max_tokens": 4, "stream": stream, "ignore_eos": True,
        "messages": [{"role": "user", "content": f"tap {stream} {PROMPT}"}],
    }  # fmt: skip
    async with gateway_server({"fast": [details_sim.url]}) as g, aiohttp.ClientSession() as s:
        for _ in range(2):
            async with s.post(f"{g.url}/v1/chat/completions", json=body) as r:
                assert r.status == 200
                text = await r.text()
        assert ('"prompt_tokens_details"' in text) is not stream  # streamed: the gateway's usage chunk, cut
    first, again = g.records
    _cached_of_a_repeat(first.cached_prompt_tokens, again.cached_prompt_tokens, again.prompt_tokens)


async def test_without_the_flag_nothing_is_reported(tmp_path: Path) -> None:
    with start_simulator(tmp_path) as sim:
        target = Target(name="sim", url=sim.url, model=sim.model)
        spec = ProbeSpec("repeat", "chat", 4, prompt=PROMPT)
        async with Prober(target) as prober:
            records = [await prober.probe(spec) for _ in range(2)]
    assert [r.cached_prompt_tokens for r in records] == [None, None]
    assert all(r.prompt_tokens for r in records)
