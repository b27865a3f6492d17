"""`lanewatch sim` over real sockets: the openai client over TLS, ground truth, /metrics, errors."""

from __future__ import annotations

import json
import ssl
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.simulator import tokens
from tests.servers import SimHandle, start_simulator

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": "Hello, world! How are you?"}]
HELLO_PROMPT_TOKENS = 1 + 4 + tokens.count_text_tokens(HELLO[0]["content"]) + 3


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    with start_simulator(tmp_path_factory.mktemp("sim"), profile="fast", tls=True) as handle:
        yield handle


def test_openai_client_streams_over_tls_and_truth_matches_usage(sim: SimHandle) -> None:
    assert sim.cert_path is not None and b"BEGIN CERTIFICATE" in sim.cert_path.read_bytes()
    rid = f"it-{uuid.uuid4().hex}"
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": HELLO[0]["content"]}]
    trust = ssl.create_default_context(cafile=str(sim.cert_path))
    with openai.DefaultHttpxClient(verify=trust) as http:
        client = openai.OpenAI(base_url=f"{sim.url}/v1", api_key="unused", http_client=http)
        stream = client.chat.completions.create(
            model=sim.model,
            messages=messages,
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers={"x-request-id": rid},
            extra_body={"ignore_eos": True},
        )
        pieces, usage, finish = [], None, None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                if choice.delta.content:
                    pieces.append(choice.delta.content)
                finish = choice.finish_reason or finish
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens) == (HELLO_PROMPT_TOKENS, 12)
    assert len(pieces) == 12 and finish == "length"
    truth = sim.truth(rid)
    assert truth["output_tokens"] == usage.completion_tokens
    assert truth["prompt_tokens"] == usage.prompt_tokens
    assert truth["finished_reason"] == "length" and truth["http_status"] == 200
    assert 0 < truth["queue_s"] + truth["prefill_s"] <= truth["ttft_s"] < truth["e2e_s"]
    assert truth["decode_s"] > 0
    assert sim.truth(f"chatcmpl-{rid}") == truth  # the response id finds it too


def test_output_is_deterministic_and_seeded(sim: SimHandle) -> None:
    def reply(seed: int) -> str:
        body = {"model": sim.model, "messages": HELLO, "max_tokens": 8, "seed": seed}
        with sim.client() as c:
            r = c.post("/v1/chat/completions", json=body)
        r.raise_for_status()
        content: str = r.json()["choices"][0]["message"]["content"]
        return content

    assert reply(1) == reply(1)
    assert reply(1) != reply(2)


def test_completions_stream_and_whole(sim: SimHandle) -> None:
    body = {"model": sim.model, "prompt": "one two three", "max_tokens": 5, "ignore_eos": True}
    with sim.client() as c:
        whole = c.post("/v1/completions", json=body).json()
        assert whole["object"] == "text_completion"
        assert whole["usage"] == {"prompt_tokens": 4, "total_tokens": 9, "completion_tokens": 5}
        frames = _frames(c, "/v1/completions", {**body, "stream": True})
    assert frames[-1] == "[DONE]"
    texts = [json.loads(f)["choices"][0]["text"] for f in frames[:-1]]
    assert "".join(texts) == whole["choices"][0]["text"]


def test_natural_stop_and_continuous_usage(sim: SimHandle) -> None:
    body = {
        "model": sim.model,
        "messages": HELLO,
        "max_tokens": 600,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    with sim.client() as c:
        frames = _frames(c, "/v1/chat/completions", body)
    chunks = [json.loads(f) for f in frames[:-1]]
    content = [ch for ch in chunks if ch["choices"] and ch["choices"][0]["delta"].get("content")]
    assert [ch["usage"]["completion_tokens"] for ch in content] == list(range(1, len(content) + 1))
    assert content[-1]["choices"][0]["finish_reason"] == "stop"  # natural lengths end before 600
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == len(content)


def _frames(c: httpx.Client, path: str, body: dict[str, object]) -> list[str]:
    with c.stream("POST", path, json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        return [line[6:] for line in r.iter_lines() if line.startswith("data: ")]


# name -> (type, labels besides model_name and engine); vLLM V1's /metrics names
EXPECTED = {
    "vllm:num_requests_running": ("gauge", set()),
    "vllm:num_requests_waiting": ("gauge", set()),
    "vllm:num_requests_waiting_by_reason": ("gauge", {"reason"}),
    "vllm:kv_cache_usage_perc": ("gauge", set()),
    "vllm:engine_sleep_state": ("gauge", {"sleep_state"}),
    "vllm:prompt_tokens": ("counter", set()),
    "vllm:generation_tokens": ("counter", set()),
    "vllm:prompt_tokens_by_source": ("counter", {"source"}),
    "vllm:prompt_tokens_cached": ("counter", set()),
    "vllm:prefix_cache_queries": ("counter", set()),
    "vllm:prefix_cache_hits": ("counter", set()),
    "vllm:num_preemptions": ("counter", set()),
    "vllm:request_success": ("counter", {"finished_reason"}),
    "vllm:time_to_first_token_seconds": ("histogram", set()),
    "vllm:inter_token_latency_seconds": ("histogram", set()),
    "vllm:request_time_per_output_token_seconds": ("histogram", set()),
    "vllm:e2e_request_latency_seconds": ("histogram", set()),
    "vllm:request_queue_time_seconds": ("histogram", set()),
    "vllm:request_inference_time_seconds": ("histogram", set()),
    "vllm:request_prefill_time_seconds": ("histogram", set()),
    "vllm:request_decode_time_seconds": ("histogram", set()),
    "vllm:request_prompt_tokens": ("histogram", set()),
    "vllm:request_generation_tokens": ("histogram", set()),
    "vllm:request_max_num_generation_tokens": ("histogram", set()),
    "vllm:request_params_max_tokens": ("histogram", set()),
    "vllm:iteration_tokens_total": ("histogram", set()),
    "vllm:request_num_preemptions": ("histogram", set()),
}
TTFT_LE = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0"]


def test_metrics_parse_with_vllm_names_types_labels(sim: SimHandle) -> None:
    with sim.client() as c:
        c.post(
            "/v1/chat/completions", json={"model": sim.model, "messages": HELLO, "max_tokens": 3}
        ).raise_for_status()
        resp = c.get("/metrics")
        assert resp.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = resp.text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name, (kind, extra) in EXPECTED.items():
        assert name in families, name
        fam = families[name]
        assert fam.type == kind, name
        for sample in fam.samples:
            labels = set(sample.labels) - {"le"}
            assert labels == {"model_name", "engine"} | extra, (name, sample.labels)
            assert sample.labels["model_name"] == sim.model and sample.labels["engine"] == "0"
    ttft = families["vllm:time_to_first_token_seconds"]
    les = [s.labels["le"] for s in ttft.samples if s.name.endswith("_bucket")]
    assert les[: len(TTFT_LE)] == TTFT_LE and les[-1] == "+Inf"
    reasons = {s.labels["finished_reason"] for s in families["vllm:request_success"].samples}
    assert {"stop", "length", "abort"} <= reasons
    assert "vllm:cache_config_info" in families


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b'{"model": ', 400, None),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "model"),
        (b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', 404, "model"),
        (
            b'{"model": "MODEL", "messages": [{"role": "user", "content": "x"}], "max_tokens": -3}',
            400,
            "max_tokens",
        ),
        (
            b'{"model": "MODEL", "messages": [{"role": "user", "content": "x"}], "max_tokens": 99999999}',
            400,
            "max_tokens",
        ),
    ],
)
def test_bad_requests_get_openai_errors(sim: SimHandle, body: bytes, status: int, param: str | None) -> None:
    with sim.client() as c:
        r = c.post(
            "/v1/chat/completions",
            content=body.replace(b"MODEL", sim.model.encode()),
            headers={"content-type": "application/json", "x-request-id": "bad-1"},
        )
    assert r.status_code == status
    assert r.headers["x-request-id"] == "bad-1"
    err = r.json()["error"]
    assert err["code"] == status and err["param"] == param and err["message"] and err["type"]
    assert sim.truth("bad-1")["http_status"] == status


def test_info_endpoints_and_request_ids(sim: SimHandle) -> None:
    with sim.client() as c:
        health = c.get("/health")
        assert health.status_code == 200 and health.content == b""
        assert len(health.headers["x-request-id"]) == 32  # generated when not sent
        models = c.get("/v1/models").json()
        assert models["object"] == "list" and models["data"][0]["id"] == sim.model
        assert models["data"][0]["owned_by"] == "vllm"
        assert "version" in c.get("/version").json()
        missing = c.get("/debug/requests/never-seen")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == 404


def test_non_streaming_truth(sim: SimHandle) -> None:
    with sim.client() as c:
        start = time.perf_counter()
        r = c.post(
            "/v1/chat/completions",
            json={"model": sim.model, "messages": HELLO, "max_tokens": 20, "ignore_eos": True},
            headers={"x-request-id": "whole-1"},
        )
        client_e2e = time.perf_counter() - start
    body = r.json()
    truth = sim.truth("whole-1")
    assert body["usage"]["completion_tokens"] == truth["output_tokens"] == 20
    assert tokens.count_text_tokens(body["choices"][0]["message"]["content"]) == 20
    assert truth["ttft_s"] < truth["e2e_s"] <= client_e2e


def test_plain_http_and_model_override(tmp_path: Path) -> None:
    with start_simulator(tmp_path, profile="slow", model="big-model", admin_token_file=None) as sim:
        assert sim.url.startswith("http://") and sim.cert_path is None
        with sim.client() as c:
            r = c.post(
                "/v1/chat/completions", json={"model": "big-model", "messages": HELLO, "max_tokens": 2}
            )
            assert r.status_code == 200 and r.json()["model"] == "big-model"
            assert c.get("/admin/faults").status_code == 404  # no token file: no admin API
