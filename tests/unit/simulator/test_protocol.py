"""Request validation (OpenAI errors) and SSE frame rendering."""

from __future__ import annotations

import json

import pytest

from lanewatch.simulator import protocol

MODEL = "m"


def parse(body: object, api: protocol.Api = "chat") -> protocol.GenParams:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return protocol.parse_request(api, raw, MODEL, max_model_len=1000, seed=0)


def chat(**kw: object) -> dict[str, object]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hi there"}], **kw}


@pytest.mark.parametrize(
    ("body", "status", "param", "text"),
    [
        (b"{not json", 400, None, "Invalid JSON"),
        ([1, 2], 400, None, "JSON object"),
        ({"messages": [{"role": "user", "content": "x"}]}, 400, "model", "model"),
        (chat(model="other"), 404, "model", "does not exist"),
        (chat(max_tokens=0), 400, "max_tokens", "max_tokens"),
        (chat(max_tokens="many"), 400, "max_tokens", "max_tokens"),
        (chat(max_tokens=5000), 400, "max_tokens", "maximum context length is 1000"),
        (chat(n=2), 400, "n", "n=1"),
        ({"model": MODEL, "messages": []}, 400, "messages", "messages"),
    ],
)
def test_bad_requests_get_openai_errors(body: object, status: int, param: str | None, text: str) -> None:
    with pytest.raises(protocol.ApiError) as info:
        parse(body)
    err = info.value
    assert err.status == status and err.param == param and text in err.message
    body_json = err.body()["error"]
    assert body_json["code"] == status and body_json["type"] in protocol.ERROR_TYPES.values()


def test_chat_params() -> None:
    p = parse(
        chat(max_completion_tokens=7, stream=True, stream_options={"include_usage": True}, ignore_eos=True)
    )
    assert (p.max_tokens, p.stream, p.include_usage, p.continuous_usage, p.ignore_eos) == (
        7,
        True,
        True,
        False,
        True,
    )
    assert p.prompt_tokens == 1 + 4 + 2 + 3


def test_default_max_tokens_fills_the_context() -> None:
    p = parse({"model": MODEL, "prompt": "a b c"}, api="completions")
    assert p.prompt_tokens == 4 and p.max_tokens == 996 and p.max_tokens_param is None


def test_completion_prompt_forms() -> None:
    assert parse({"model": MODEL, "prompt": [1, 2, 3]}, api="completions").prompt_tokens == 3
    assert parse({"model": MODEL, "prompt": ["a b"]}, api="completions").prompt_tokens == 3
    with pytest.raises(protocol.ApiError, match="one prompt"):
        parse({"model": MODEL, "prompt": ["a", "b"]}, api="completions")


def frame_json(frame: bytes) -> dict[str, object]:
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    result: dict[str, object] = json.loads(frame[6:-2])
    return result


def test_chunks_are_valid_json_in_openai_shape() -> None:
    w = protocol.ChunkWriter("chat", "chatcmpl-x", 'odd "model"', 1, prompt_tokens=10)
    role = frame_json(w.role())
    assert role["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    tok = frame_json(w.token(' "quoted"\n', "length", completion_tokens=3))
    assert tok["model"] == 'odd "model"' and tok["object"] == "chat.completion.chunk"
    assert tok["choices"][0]["delta"] == {"content": ' "quoted"\n'}  # type: ignore[index]
    assert tok["choices"][0]["finish_reason"] == "length"  # type: ignore[index]
    assert tok["usage"] == {"prompt_tokens": 10, "total_tokens": 13, "completion_tokens": 3}
    usage = frame_json(w.usage(5))
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 10,
        "total_tokens": 15,
        "completion_tokens": 5,
    }
    with pytest.raises(json.JSONDecodeError):
        json.loads(w.malformed()[6:])


def test_completion_chunks() -> None:
    w = protocol.ChunkWriter("completions", "cmpl-x", "m", 1, prompt_tokens=2)
    tok = frame_json(w.token(" a", None))
    assert tok["object"] == "text_completion"
    assert tok["choices"] == [
        {"index": 0, "text": " a", "logprobs": None, "stop_reason": None, "finish_reason": None}
    ]


def test_per_request_metrics_follow_vllms_definitions_and_read_back() -> None:
    from lanewatch.collector.http1.sse import SseParser

    m = protocol.per_request_metrics(10.0, 10.005, 10.045, 10.135, tokens=10)
    assert m["queue_time_ms"] == pytest.approx(5.0)
    assert m["time_to_first_token_ms"] == pytest.approx(40.0)  # from scheduling, not arrival
    assert m["generation_time_ms"] == pytest.approx(90.0)
    assert m["mean_itl_ms"] == pytest.approx(10.0)
    assert m["tokens_per_second"] == pytest.approx(10 / 0.13)
    assert "mean_itl_ms" not in protocol.per_request_metrics(1.0, 1.0, 1.1, 1.1, tokens=1)
    w = protocol.ChunkWriter("chat", "chatcmpl-1", "m", 1, 7)
    (chunk,) = SseParser().feed(w.usage(10, m))
    assert chunk.metrics is not None and chunk.metrics.ttft_s == pytest.approx(0.04)
    assert chunk.usage is not None and chunk.usage.completion_tokens == 10
    assert b'"metrics"' not in w.usage(10)


def test_cached_tokens_ride_in_prompt_tokens_details_as_vllm_writes_them() -> None:
    w = protocol.ChunkWriter("chat", "chatcmpl-1", "m", 1, 40)
    usage = frame_json(w.usage(3, cached_tokens=32))["usage"]
    assert usage == {
        "prompt_tokens": 40,
        "total_tokens": 43,
        "completion_tokens": 3,
        "prompt_tokens_details": {"cached_tokens": 32},
    }
    assert frame_json(w.usage(3))["usage"] == {
        "prompt_tokens": 40,
        "total_tokens": 43,
        "completion_tokens": 3,
    }
    assert protocol.usage_dict(40, 3, 32)["prompt_tokens_details"] == {"cached_tokens": 32}
    assert "prompt_tokens_details" not in protocol.usage_dict(40, 3)
