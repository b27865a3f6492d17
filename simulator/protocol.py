"""vLLM's OpenAI API shapes, pure: request validation into `GenParams`, response and chunk rendering.

Errors are OpenAI error JSON as vLLM sends it: `{"error": {"message", "type", "param", "code"}}`
with the HTTP status in `code`: 400 BadRequestError (invalid JSON, a missing or ill-typed field,
max_tokens < 1, a prompt plus max_tokens beyond max_model_len), 404 NotFoundError (unknown model).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import tokens

Api = Literal["chat", "completions"]
ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class ApiError(Exception):
    """A request the server refuses, with its HTTP status and OpenAI error fields."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> dict[str, Any]:
        """The OpenAI error JSON."""
        err_type = ERROR_TYPES.get(self.status, "BadRequestError")
        # The message may quote the request (a model name): a lone surrogate in it ("\ud800" in
        # the JSON) has no UTF-8 form, and the response must still encode.
        message = self.message.encode("utf-8", "replace").decode("utf-8")
        return {"error": {"message": message, "type": err_type, "param": self.param, "code": self.status}}


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False
    seed: int | None = None
    n: int = 1
    temperature: float | None = None
    top_p: float | None = None


class StreamOptions(BaseModel):
    """OpenAI `stream_options`, with vLLM's `continuous_usage_stats`."""

    model_config = ConfigDict(extra="allow")

    include_usage: bool = False
    continuous_usage_stats: bool = False


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Request):
    """`POST /v1/chat/completions` fields the simulator honours (others are accepted and ignored)."""

    messages: list[_Message] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)


class CompletionRequest(_Request):
    """`POST /v1/completions` fields the simulator honours."""

    prompt: str | list[int] | list[str] | list[list[int]]


_Request.model_rebuild()
ChatRequest.model_rebuild()
CompletionRequest.model_rebuild()


@dataclass(frozen=True)
class GenParams:
    """A validated generation request."""

    api: Api
    model: str
    prompt_ids: list[int]
    digest: int
    max_tokens: int
    max_tokens_param: int | None
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    temperature: float | None
    top_p: float | None

    @property
    def prompt_tokens(self) -> int:
        """Prompt length in tokens."""
        return len(self.prompt_ids)


def parse_request(api: Api, raw: bytes, served_model: str, max_model_len: int, seed: int) -> GenParams:
    """Validate a request body; raise ApiError with vLLM's status and a message naming the field."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nesting deeper than Python's stack
        raise ApiError(400, f"Invalid JSON body: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.")
    cls = ChatRequest if api == "chat" else CompletionRequest
    try:
        req = cls.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ApiError(
            400, f"{loc}: {first['msg']}", param=str(first["loc"][0]) if first["loc"] else None
        ) from None
    if req.model != served_model:
        raise ApiError(404, f"The model `{req.model}` does not exist.", param="model")
    if req.n != 1:
        raise ApiError(400, "n: only n=1 is supported by lanewatch sim.", param="n")
    ids, text = _prompt(req)
    return _params(api, req, ids, text, max_model_len, seed)


def _prompt(req: _Request) -> tuple[list[int], str]:
    if isinstance(req, ChatRequest):
        pairs = [(m.role, tokens.message_text(m.content)) for m in req.messages]
        return tokens.chat_prompt_ids(pairs), "\n".join(f"{r}:{t}" for r, t in pairs)
    assert isinstance(req, CompletionRequest)
    p: Any = req.prompt
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str | list):
        p = p[0]
    if isinstance(p, str):
        return tokens.completion_prompt_ids(p), p
    if p and all(isinstance(x, int) for x in p):
        ids = [int(x) for x in p]
        return ids, " ".join(map(str, ids))
    raise ApiError(400, "prompt: one prompt per request (a string or a list of token ids).", param="prompt")


def _params(api: Api, req: _Request, ids: list[int], text: str, max_model_len: int, seed: int) -> GenParams:
    if not ids:
        raise ApiError(400, "prompt: the prompt is empty.", param="prompt")
    requested = req.max_tokens
    if isinstance(req, ChatRequest) and req.max_completion_tokens is not None:
        requested = req.max_completion_tokens
    max_tokens = requested if requested is not None else max_model_len - len(ids)
    if len(ids) + max_tokens > max_model_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{len(ids) + max_tokens} tokens ({len(ids)} in the messages, {max_tokens} in the completion). "
            "Please reduce the length of the messages or completion.",
            param="max_tokens",
        )
    if max_tokens < 1:
        raise ApiError(
            400, f"max_tokens: the prompt ({len(ids)} tokens) leaves no room to generate.", "max_tokens"
        )
    opts = req.stream_options or StreamOptions()
    return GenParams(
        api=api,
        model=req.model,
        prompt_ids=ids,
        digest=tokens.text_digest(text, req.seed if req.seed is not None else seed),
        max_tokens=max_tokens,
        max_tokens_param=requested,
        ignore_eos=req.ignore_eos,
        stream=req.stream,
        include_usage=req.stream and opts.include_usage,
        continuous_usage=req.stream and opts.include_usage and opts.continuous_usage_stats,
        temperature=req.temperature,
        top_p=req.top_p,
    )


class ChunkWriter:
    """Renders one stream's SSE frames (`data: {json}\\n\\n`) without re-encoding fixed parts."""

    def __init__(self, api: Api, response_id: str, model: str, created: int, prompt_tokens: int) -> None:
        self.api = api
        self.prompt_tokens = prompt_tokens
        obj = "chat.completion.chunk" if api == "chat" else "text_completion"
        self._head = (
            f'data: {{"id":{json.dumps(response_id)},"object":"{obj}","created":{created},'
            f'"model":{json.dumps(model)},"choices":'
        ).encode()

    def role(self) -> bytes:
        """The first chat frame: the assistant role with empty content."""
        return self._head + _ROLE_CHOICE

    def token(self, text: str, finish_reason: str | None, completion_tokens: int | None = None) -> bytes:
        """A content frame; `finish_reason` on the last one; usage so far when given."""
        fin = "null" if finish_reason is None else f'"{finish_reason}"'
        if self.api == "chat":
            choice = f'[{{"index":0,"delta":{{"content":{json.dumps(text)}}},"logprobs":null,'
        else:
            choice = f'[{{"index":0,"text":{json.dumps(text)},"logprobs":null,"stop_reason":null,'
        choice += f'"finish_reason":{fin}}}]'
        usage = "" if completion_tokens is None else f',"usage":{self._usage(completion_tokens)}'
        return self._head + f"{choice}{usage}}}\n\n".encode()

    def usage(
        self,
        completion_tokens: int,
        metrics: dict[str, float] | None = None,
        cached_tokens: int | None = None,
    ) -> bytes:
        """The final usage frame (`choices: []`), with per-request metrics and cached tokens when given."""
        extra = "" if metrics is None else f',"metrics":{json.dumps(metrics, separators=(",", ":"))}'
        return (
            self._head + f'[],"usage":{self._usage(completion_tokens, cached_tokens)}{extra}}}\n\n'.encode()
        )

    def malformed(self) -> bytes:
        """A frame whose JSON is cut short (the malformed-chunk fault)."""
        return self._head + b'[{"index":0,"delta":{"content":"\n\n'

    def _usage(self, completion: int, cached: int | None = None) -> str:
        p = self.prompt_tokens
        details = "" if cached is None else f',"prompt_tokens_details":{{"cached_tokens":{cached}}}'
        counts = f'"prompt_tokens":{p},"total_tokens":{p + completion},"completion_tokens":{completion}'
        return f"{{{counts}{details}}}"


DONE_FRAME = b"data: [DONE]\n\n"
_ROLE_CHOICE = (
    b'[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
)


def usage_dict(
    prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None
) -> dict[str, Any]:
    """OpenAI `usage`; vLLM's `prompt_tokens_details` when cached tokens are given."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return usage


def per_request_metrics(
    queued_s: float, scheduled_s: float, first_token_s: float, last_token_s: float, tokens: int
) -> dict[str, float]:
    """vLLM's `--enable-per-request-metrics` object from the engine's timestamps (seconds, one clock).

    As vLLM's build_per_request_timing_metrics: TTFT counts from scheduling (the prefill), the
    generation time from the first to the last token, throughput over scheduling to the last
    token; a value without its inputs is left out, as vLLM leaves out nulls.
    """
    out = {
        "time_to_first_token_ms": (first_token_s - scheduled_s) * 1000,
        "generation_time_ms": (last_token_s - first_token_s) * 1000,
        "queue_time_ms": (scheduled_s - queued_s) * 1000,
    }
    if tokens > 1:
        out["mean_itl_ms"] = (last_token_s - first_token_s) / (tokens - 1) * 1000
    if last_token_s > scheduled_s:
        out["tokens_per_second"] = tokens / (last_token_s - scheduled_s)
    return out


def full_response(
    p: GenParams,
    response_id: str,
    created: int,
    text: str,
    finish_reason: str,
    completion_tokens: int,
    metrics: dict[str, float] | None = None,
    cached_tokens: int | None = None,
) -> dict[str, Any]:
    """The non-streaming response body (with the per-request metrics and cached tokens when given)."""
    if p.api == "chat":
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text, "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "chat.completion"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish_reason,
            "stop_reason": None,
        }
        obj = "text_completion"
    return {
        "id": response_id,
        "object": obj,
        "created": created,
        "model": p.model,
        "choices": [choice],
        "usage": usage_dict(p.prompt_tokens, completion_tokens, cached_tokens),
        **({"metrics": metrics} if metrics is not None else {}),
    }
