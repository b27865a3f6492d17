"""With `export.record_content` on, prompt and response text reach records and spans, and only those.

The collector takes the switch from its config file, the gateway from `--record-content`. A
distinctive prompt goes through the probes (to the simulator directly and through the gateway)
and through the gateway from a client, streamed and not; the simulator's answer to it is
deterministic. Every records file and every exported span must then hold both texts, as the
record's fields and as the GenAI `gen_ai.input.messages` / `gen_ai.output.messages` attributes,
while /metrics holds neither. (The off case is test_secrets.py.)
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.servers import free_port, start_simulator
from tests.waiting import eventually

from .processes import Service, service, write_yaml
from .span_capture import span_capture

pytestmark = pytest.mark.integration

PROMPT = f"Describe the content canary {secrets.token_hex(8)} in one line"
TOKENS = 16


def records(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a records file."""
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    return [json.loads(x) for x in lines if x.endswith("\n")]


def span_attributes(bodies: list[bytes]) -> Iterator[tuple[str, dict[str, str]]]:
    """(service name, string attributes) of every exported span."""
    for body in bodies:
        for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
            res = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
            for ss in rs.scope_spans:
                for span in ss.spans:
                    yield res["service.name"], {kv.key: kv.value.string_value for kv in span.attributes}


def start(stack: ExitStack, tmp: Path, spans_url: str) -> tuple[str, Service, Service]:
    """The simulator, a gateway with --record-content and a collector with export.record_content."""
    sim = stack.enter_context(start_simulator(tmp))
    gw_port, col_port = free_port(), free_port()
    gw_args = [
        "gateway", "--host", "127.0.0.1", "--port", str(gw_port), "--upstream", f"slow={sim.url}",
        "--records", str(tmp / "tap.jsonl"), "--otlp-endpoint", spans_url, "--record-content",
    ]  # fmt: skip
    gw = stack.enter_context(service(gw_args, gw_port, tmp / "gateway.log", "/metrics"))
    targets = [
        {"name": "direct", "url": sim.url, "lane": "slow", "model": sim.model},
        {"name": "via-gateway", "url": gw.url, "lane": "slow", "model": sim.model, "scrape": False},
    ]
    cfg = {
        "targets": targets,
        "probe": {"interval_s": 0.2, "classes": [{"name": "canary", "prompt": PROMPT, "max_tokens": TOKENS}]},
        "scrape": {"enabled": False},
        "otlp": {"enabled": False},
        "gpu": {"enabled": False},
        "export": {
            "otlp_endpoint": spans_url,
            "records_path": str(tmp / "records.jsonl"),
            "record_content": True,
        },
        "server": {"host": "127.0.0.1", "port": col_port},
    }
    args = ["collect", "-c", str(write_yaml(tmp / "collect.yaml", cfg))]
    col = stack.enter_context(service(args, col_port, tmp / "collect.log", "/healthz"))
    return sim.model, gw, col


def client_requests(gw: Service, model: str) -> str:
    """A streamed and a plain chat request through the gateway; the answer's text."""
    chat = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": TOKENS,
        "ignore_eos": True,  # as the probes ask: the same prompt and length give the same text
    }
    with httpx.Client(timeout=10) as c:
        assert c.post(f"{gw.url}/v1/chat/completions", json={**chat, "stream": True}).status_code == 200
        r = c.post(f"{gw.url}/v1/chat/completions", json={**chat, "stream": False})
        assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["message"]["content"])


def settle(tmp: Path) -> None:
    """Until each probe target has two successful records."""

    def probed() -> bool:
        ok = [r["target"] for r in records(tmp / "records.jsonl") if r["error"] is None]
        return min(ok.count("direct"), ok.count("via-gateway")) >= 2

    eventually(probed, 20, "two good records per target", context=lambda: str(records(tmp / "records.jsonl")))


def test_record_content_puts_prompt_and_response_in_records_and_spans_not_metrics(tmp_path: Path) -> None:
    with span_capture() as spans, ExitStack() as stack:
        model, gw, col = start(stack, tmp_path, spans.url)
        answer = client_requests(gw, model)
        settle(tmp_path)
        metrics = gw.metrics() + col.metrics()
        stack.close()  # the processes stop: records written, spans flushed
        bodies = list(spans.bodies)
    assert len(answer) > 40
    assert PROMPT not in metrics and answer not in metrics

    probes = [r for r in records(tmp_path / "records.jsonl") if r["error"] is None]
    taps = [r for r in records(tmp_path / "tap.jsonl") if r["error"] is None]
    assert {r["target"] for r in probes} == {"direct", "via-gateway"}
    assert len(taps) >= 4  # the two client requests and the probes through the gateway
    for r in probes + taps:
        assert (r["source"], r["prompt_text"], r["response_text"]) == (r["source"], PROMPT, answer)

    expected_in = [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]
    seen = {"lanewatch-collector": 0, "lanewatch-gateway": 0}
    for name, attrs in span_attributes(bodies):
        if "gen_ai.input.messages" not in attrs:
            continue
        assert json.loads(attrs["gen_ai.input.messages"]) == expected_in
        if "error.type" in attrs:  # a probe through the gateway cut off as the collector stopped
            cut = json.loads(attrs.get("gen_ai.output.messages", "[]"))  # none before the response began
            assert all(answer.startswith(m["parts"][0]["content"]) for m in cut)
            continue
        [out] = json.loads(attrs["gen_ai.output.messages"])
        [part] = out["parts"]
        seen[name] += 1
        assert (out["role"], part, out["finish_reason"]) == (
            "assistant",
            {"type": "text", "content": answer},
            "length",
        )
    assert seen["lanewatch-collector"] >= len(probes) and seen["lanewatch-gateway"] >= len(taps), seen
