"""The gateway reads a request's token bound and prompt as vLLM's own request models do.

Bodies are generated (hypothesis, a fixed seed) and read twice: by lanewatch's
`request_reading` and by vLLM 0.32's `ChatCompletionRequest` / `CompletionRequest`, in the
engine's own venv (tests/vllm/request_models.py, one process for the whole run). For any body
vLLM accepts, the two readings are equal. For any body vLLM refuses on a field lanewatch reads,
lanewatch refuses it too (a 400 naming the field), so no client reaches a smaller class with a
body the engine would read as larger. A completions body vLLM refuses by its own rule (no prompt,
or an empty one) is passed on, read as no prompt: vLLM answers it 400 without work.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lanewatch.collector.openai_api.request_reading import (
    ReadingError,
    read_max_tokens,
    read_prompt,
    read_sequences,
)

from .engine import Install

pytestmark = pytest.mark.vllm
ORACLE = __file__.replace("test_request_reading_real.py", "request_models.py")
ABSENT = object()  # a strategy's value for "the key is not in the body"


class Oracle:
    """vLLM's reading of bodies, through one long-lived process of the engine's interpreter."""

    def __init__(self, inst: Install) -> None:
        python = inst.root / "venv" / "bin" / "python"
        self.proc = subprocess.Popen(
            [str(python), "-W", "ignore", ORACLE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def read(self, api: str, body: dict[str, Any]) -> dict[str, Any]:
        """One body's reading; a line that is not an answer (a library's print) is passed over."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"api": api, "body": body}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, "the vLLM reader ended"
            if line.startswith('{"ok"'):
                answer: dict[str, Any] = json.loads(line)
                return answer

    def close(self) -> None:
        """End the process."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)


@pytest.fixture(scope="module")
def oracle(vllm_install: Install) -> Iterator[Oracle]:
    o = Oracle(vllm_install)
    yield o
    o.close()


def _numeric_text() -> st.SearchStrategy[str]:
    n = st.integers(-3, 10**7)
    return st.one_of(
        n.map(str),
        n.map(lambda i: f" {i} "),
        n.map(lambda i: f"{i}.0"),
        n.map(lambda i: f"{i:_}"),
        n.map(lambda i: f"{i}.5"),
        st.text(max_size=4),
    )


COUNT = st.one_of(
    st.just(ABSENT),
    st.none(),
    st.booleans(),
    st.integers(-5, 2**40),
    st.integers(0, 10**6).map(float),
    st.floats(allow_nan=False, allow_infinity=False),
    _numeric_text(),
    st.lists(st.integers(0, 9), max_size=2),
    st.just({"n": 1}),
)
TOKEN_IDS = st.lists(st.integers(-2, 60_000), max_size=30)
PROMPT = st.one_of(
    st.just(ABSENT),
    st.none(),
    st.text(max_size=30),
    st.lists(st.text(max_size=10), max_size=3),
    TOKEN_IDS,
    st.lists(TOKEN_IDS, min_size=1, max_size=3),
    st.lists(st.one_of(st.integers(0, 9), st.text(max_size=3)), min_size=2, max_size=3),
    st.just({"text": "hi"}),
)


# prompt_embeds as JSON carries it (base64 text; never decoded here: the model only types it)
EMBEDS = st.one_of(
    st.just(ABSENT),
    st.just(ABSENT),
    st.just(ABSENT),
    st.none(),
    st.just("AAAA"),
    st.lists(st.just("AAAA"), max_size=3),
)


def _body(base: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**base, **{k: v for k, v in fields.items() if v is not ABSENT}}


def _check_sequences(body: dict[str, Any], api: Any, vllm: dict[str, Any]) -> None:
    """`n` as vLLM reads it; stricter where vLLM's model takes what its sampling refuses (n < 1) or
    what is no count (a bool, which pydantic reads as 0 or 1): a 400 naming `n`."""
    try:
        ours: int | None = read_sequences(body, api)
        refused: ReadingError | None = None
    except ReadingError as exc:
        ours, refused = None, exc
    if vllm["ok"]:
        if isinstance(body.get("n"), bool) or vllm["n"] < 1:
            assert refused is not None and refused.field == "n", (body, vllm)
        else:
            assert refused is None and ours == vllm["n"], (body, vllm, refused)
    elif vllm["kind"] == "type" and vllm["fields"] == ["n"]:
        assert refused is not None and refused.field == "n", (body, vllm)


SETTINGS = settings(
    max_examples=600,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@SETTINGS
@given(max_tokens=COUNT, max_completion_tokens=COUNT, n=COUNT, content=st.text(max_size=20))
def test_a_chat_body_reads_as_vllm_reads_it(
    oracle: Oracle, max_tokens: Any, max_completion_tokens: Any, n: Any, content: str
) -> None:
    base = {"model": "m", "messages": [{"role": "user", "content": content}]}
    body = _body(base, max_tokens=max_tokens, max_completion_tokens=max_completion_tokens, n=n)
    vllm = oracle.read("chat", body)
    _check_sequences(body, "chat", vllm)
    try:
        ours: int | None = read_max_tokens(body, "chat")
        refused: ReadingError | None = None
    except ReadingError as exc:
        ours, refused = None, exc
    if vllm["ok"]:
        assert refused is None, (body, refused)
        assert ours == vllm["max_tokens"], body
        assert read_prompt(body, "chat").chars == len(content)
    elif set(vllm["fields"]) & {"max_tokens", "max_completion_tokens"}:
        assert refused is not None and refused.field in vllm["fields"], (body, vllm)


@SETTINGS
@given(max_tokens=COUNT, prompt=PROMPT, n=COUNT, embeds=EMBEDS)
def test_a_completions_body_reads_as_vllm_reads_it(
    oracle: Oracle, max_tokens: Any, prompt: Any, n: Any, embeds: Any
) -> None:
    body = _body({"model": "m"}, max_tokens=max_tokens, prompt=prompt, n=n, prompt_embeds=embeds)
    vllm = oracle.read("completions", body)
    _check_sequences(body, "completions", vllm)
    if vllm["ok"]:  # the engine requests vLLM runs (at least one counts)
        assert read_prompt(body, "completions").count == max(1, vllm["prompts"]), (body, vllm)
    try:
        bound = read_max_tokens(body, "completions")
        tokens = read_prompt(body, "completions").tokens
        refused: ReadingError | None = None
    except ReadingError as exc:
        bound, tokens, refused = None, None, exc
    if vllm["ok"]:
        assert refused is None, (body, refused)
        assert (bound, tokens) == (vllm["max_tokens"], vllm["token_ids"]), body
    elif vllm["kind"] == "rule":  # no prompt, or an empty one: passed on, and vLLM answers 400
        assert refused is not None or tokens == 0, (body, vllm)
    elif set(vllm["fields"]) & {"max_tokens", "prompt"}:
        assert refused is not None and refused.field in vllm["fields"], (body, vllm)
