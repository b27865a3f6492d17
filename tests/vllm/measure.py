"""Measure a real vLLM's start time, TTFT and per-token time for each cached model, one stream at a time.

    python -m tests.vllm.measure [MODEL ...]      (default: tiny small; prints one JSON line each)

Figures are client-side, on 127.0.0.1: TTFT to the first content chunk, per-token time as the
median gap between content chunks of a 64-token answer.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .engine import find_install, start_vllm

REQUESTS = 10
TOKENS = 64


def one_stream(client: httpx.Client, model: str, i: int) -> tuple[float, list[float]]:
    """TTFT and the gaps between content chunks of one streamed chat."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"request {i}: tell me a story"}],
        "max_tokens": TOKENS,
        "ignore_eos": True,
        "stream": True,
    }
    started = time.monotonic()
    stamps: list[float] = []
    with client.stream("POST", "/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if (
                line.startswith("data: {")
                and '"content":"' in line.replace(" ", "")
                and '"content":""' not in line
            ):
                stamps.append(time.monotonic())
    return stamps[0] - started, [b - a for a, b in itertools.pairwise(stamps)]


def main(argv: list[str]) -> int:
    """Start each model's server in turn and print its figures."""
    inst, why = find_install()
    if inst is None:
        print(why, file=sys.stderr)
        return 1
    for model in argv[1:] or ["tiny", "small"]:
        with tempfile.TemporaryDirectory() as tmp, start_vllm(inst, Path(tmp), model) as h:
            with httpx.Client(base_url=h.url, timeout=300) as client:
                one_stream(client, model, -1)  # warm-up
                runs = [one_stream(client, model, i) for i in range(REQUESTS)]
            ttfts = [t for t, _ in runs]
            gaps = [g for _, gs in runs for g in gs]
            print(json.dumps({
                "model": model,
                "version": inst.version,
                "start_s": round(h.started_in_s, 1),
                "ttft_ms_median": round(1000 * statistics.median(ttfts), 1),
                "per_token_ms_median": round(1000 * statistics.median(gaps), 2),
                "per_token_ms_p90": round(1000 * sorted(gaps)[int(0.9 * len(gaps))], 2),
            }), flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
