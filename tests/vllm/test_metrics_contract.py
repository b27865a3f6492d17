"""/metrics of a real vLLM against what lanewatch reads and what its simulator exposes."""

from __future__ import annotations

import time

import httpx
import pytest

from .contract import KNOWN_DRIFT, drift, families, lanewatch_reads, missing_reads, simulator_exposition
from .engine import VllmHandle
from .traffic import exercise

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def real_page(vllm_server: VllmHandle) -> str:
    """The real page after chat and completions traffic, streamed and not."""
    with httpx.Client(base_url=vllm_server.url, timeout=120) as client:
        exercise(client, vllm_server.model)
        time.sleep(0.5)
        return client.get("/metrics").text


def test_every_family_lanewatch_reads_is_on_the_real_page_with_its_type_and_labels(real_page: str) -> None:
    real = families(real_page)
    sim = families(simulator_exposition(2048))
    reads = lanewatch_reads({n: f.type for n, f in sim.items()})
    assert len(reads) >= 15, reads  # the scrape, rules and dashboards read this many at least
    assert missing_reads(reads, real) == []


def test_the_simulators_whole_vllm_exposition_is_a_subset_of_the_real_one(
    real_page: str, vllm_server: VllmHandle
) -> None:
    sim = families(simulator_exposition(vllm_server.max_model_len))
    real = families(real_page)
    assert len(sim) >= 50 and len(real) > len(sim)
    assert drift(sim, real) == list(KNOWN_DRIFT.get(vllm_server.version, ()))


def test_token_count_buckets_follow_max_model_len_on_both(real_page: str, vllm_server: VllmHandle) -> None:
    real = families(real_page)["vllm:request_prompt_tokens"].buckets
    assert max(b for b in real if b != float("inf")) <= vllm_server.max_model_len
    other = families(simulator_exposition(16384))["vllm:request_prompt_tokens"].buckets
    assert other - real  # a simulator at another max-model-len would drift: the comparison can fail
