"""Requests to a real vLLM with a known W3C traceparent, and the spans they came back as."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass(frozen=True)
class Sent:
    """One request: the trace and parent span ids it carried, its usage and client-side wall time."""

    trace_id: str
    parent_span_id: str
    usage: dict[str, Any]
    wall_s: float


def traceparent() -> tuple[str, str, str]:
    """A fresh sampled W3C traceparent header, its trace id and its span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def send(client: httpx.Client, model: str, api: str, stream: bool, max_tokens: int = 8, **extra: Any) -> Sent:
    """One chat or completions request; usage from the body or the final streamed chunk."""
    header, trace_id, span_id = traceparent()
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": stream, **extra}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": f"count to ten, {trace_id[:6]}"}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = f"one two three {trace_id[:6]}"
        path = "/v1/completions"
    if stream:
        body["stream_options"] = {"include_usage": True}
    started = time.monotonic()
    usage: dict[str, Any] = {}
    if stream:
        import json

        with client.stream("POST", path, json=body, headers={"traceparent": header}) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if line.startswith("data: {"):
                    chunk = json.loads(line.removeprefix("data: "))
                    usage = chunk.get("usage") or usage
    else:
        r = client.post(path, json=body, headers={"traceparent": header})
        r.raise_for_status()
        usage = r.json()["usage"]
    return Sent(trace_id, span_id, usage, time.monotonic() - started)


# vLLM's span processor exports every ~5 s from a thread of its busy API process; on a loaded
# 2-core machine an export can come much later, and the wait ends as soon as the spans are in.
SPAN_WAIT_S = 60.0


def wait_for(found: Callable[[], bool], within_s: float = SPAN_WAIT_S) -> bool:
    """Whether `found` becomes true within `within_s` seconds (vLLM batches its span exports)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if found():
            return True
        time.sleep(0.1)
    return found()


def exercise(client: httpx.Client, model: str) -> list[Sent]:
    """Chat and completions, streamed and not, with sampling parameters: fills every request metric."""
    sent = []
    for api in ("chat", "completions"):
        for stream in (True, False):
            sent.append(send(client, model, api, stream, max_tokens=12, temperature=0.7, top_p=0.9))
    return sent
