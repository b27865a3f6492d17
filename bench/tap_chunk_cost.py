"""The tap's CPU per stream chunk, in process: `StreamTap.feed` over a vLLM-shaped chat stream.

No sockets, no event loop: one event per read, as vLLM writes them, fed through a fresh tap per
stream; the best of several repeats (the least disturbed by other work on the machine). Two
streams: 256 content chunks then one usage chunk and `[DONE]` (the usual case: usage once), and
the same with usage on every chunk (`stream_options.continuous_usage_stats`).

Run alone: `python -m bench.tap_chunk_cost [--streams 400] [--repeats 7]`.
"""

from __future__ import annotations

import argparse
import json
import time

from lanewatch.collector.gateway.tap.stream_scan import StreamTap

__all__ = ["chunk_cost_ns", "stream"]

_USAGE = {
    "prompt_tokens": 1200,
    "total_tokens": 1456,
    "completion_tokens": 256,
    "prompt_tokens_details": {"cached_tokens": 1024},
}


def _event(obj: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def stream(chunks: int = 256, continuous_usage: bool = False) -> list[bytes]:
    """The reads of one chat stream: a role chunk, `chunks` content chunks, usage, `[DONE]`."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    reads = [_event({**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    for i in range(chunks):
        obj: dict[str, object] = {**head, "choices": [{"index": 0, "delta": {"content": f" tok{i}"}}]}
        if continuous_usage:
            obj["usage"] = {"prompt_tokens": 1200, "total_tokens": 1201 + i, "completion_tokens": i + 1}
        reads.append(_event(obj))
    reads.append(_event({**head, "choices": [], "usage": _USAGE}))
    reads.append(b"data: [DONE]\n\n")
    return reads


def chunk_cost_ns(reads: list[bytes], streams: int, repeats: int, tap_class: type = StreamTap) -> float:
    """Nanoseconds of `feed` per read, the usage read at the end included: the best of `repeats` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(streams):
            tap = tap_class("chat", sse=True)
            for data in reads:
                tap.feed(data)
            _ = tap.prompt_tokens, tap.completion_tokens  # what the record reads (decoded there, once)
        best = min(best, (time.perf_counter_ns() - start) / (streams * len(reads)))
    return best


def main() -> None:
    """Print the per-chunk cost of both streams."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for label, continuous in (("usage once", False), ("usage on every chunk", True)):
        ns = chunk_cost_ns(stream(continuous_usage=continuous), args.streams, args.repeats)
        print(f"{label}: {ns:.0f} ns per chunk")


if __name__ == "__main__":
    main()
