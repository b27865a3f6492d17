"""Run in the real-vLLM venv: read each JSON line `{"api", "body"}` and answer how vLLM reads it.

A line out per line in: `{"ok": true, "max_tokens": int|null, "token_ids": int, "n": int,
"prompts": int}` when vLLM's own request model accepts the body (`max_tokens` is the bound vLLM's
sampling reads: chat's `max_completion_tokens` when set, else `max_tokens`; `n` as the model holds
it, chat's null as 1; `prompts` the engine requests vLLM's renderer splits a completions body
into), or `{"ok": false, "kind", "fields": [...]}` with the top-level fields vLLM's refusal names:
kind `type` for a field's type or range, `rule` for a model validator's own rule (a prompt missing
or empty). Only vLLM and pydantic are imported: this file runs under the engine's interpreter, not
lanewatch's.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import ValidationError
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.completion.protocol import CompletionRequest
from vllm.renderers.inputs.preprocess import prompt_to_seq


def _token_ids(prompt: Any) -> int:
    if isinstance(prompt, list) and prompt and all(isinstance(p, int) for p in prompt):
        return len(prompt)
    if isinstance(prompt, list) and all(isinstance(p, list) for p in prompt):
        return sum(len(p) for p in prompt)
    return 0


def read(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """vLLM's reading of one body."""
    try:
        if api == "chat":
            chat = ChatCompletionRequest.model_validate(body)
            bound = chat.max_completion_tokens if chat.max_completion_tokens is not None else chat.max_tokens
            n = chat.n if chat.n is not None else 1
            return {"ok": True, "max_tokens": bound, "token_ids": 0, "n": n, "prompts": 1}
        done = CompletionRequest.model_validate(body)
        # as the renderer's preprocess_completion gathers them: embeds first, then the prompt
        prompts = sum(len(prompt_to_seq(p)) for p in (done.prompt_embeds, done.prompt) if p is not None)
        return {
            "ok": True,
            "max_tokens": done.max_tokens,
            "token_ids": _token_ids(done.prompt),
            "n": done.n,
            "prompts": prompts,
        }
    except ValidationError as exc:  # a field's type or range
        return {
            "ok": False,
            "kind": "type",
            "fields": sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]}),
        }
    except Exception as exc:  # a model validator's own rule (VLLMValidationError names its parameter)
        field = getattr(exc, "parameter", None)
        return {"ok": False, "kind": "rule", "fields": [field] if field else [], "error": str(exc)[:200]}


def main() -> None:
    for line in sys.stdin:
        query = json.loads(line)
        print(json.dumps(read(query["api"], query["body"])), flush=True)


if __name__ == "__main__":
    main()
