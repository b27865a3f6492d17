"""No secret, prompt or response text leaves the loop: logs, /metrics, spans, records and state are scanned.

The whole loop runs with distinctive tokens and keys: the simulator requires an API key
(as `vllm serve --api-key`) and has an admin token; the gateway sends the lane's key upstream
and guards its admin API; the collector probes with a target's key file (and one wrong key);
the degrade controller takes Alertmanager's token and drives the gateway with its token;
clients send their own bearer key and wrong tokens to every admin API. Every span goes to a
capturing OTLP receiver. Then every output is searched for every secret and for the prompt
and response text, which `export.record_content` (off by default) alone may let through.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import Counter
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app as cli
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.timing import RequestTiming
from tests.alertmanager_bodies import alert, body
from tests.servers import SimHandle, free_port, start_simulator
from tests.waiting import eventually

from .processes import Service, secret_file, service, write_yaml
from .span_capture import SpanCapture, span_capture

pytestmark = pytest.mark.integration


def canary(what: str) -> str:
    return f"{what}-{secrets.token_hex(12)}"


SIM_KEY, SIM_ADMIN, GW_TOKEN, AM_TOKEN = (
    canary("simkey"),
    canary("simadmin"),
    canary("gwtoken"),
    canary("amtoken"),
)
WRONG_KEY, WRONG_GW, WRONG_AM, CLIENT_KEY = (
    canary("wrongkey"),
    canary("wronggw"),
    canary("wrongam"),
    canary("client"),
)
INGEST_TOKEN, WRONG_INGEST = canary("ingest"), canary("wrongingest")
SECRETS = [SIM_KEY, SIM_ADMIN, GW_TOKEN, AM_TOKEN, WRONG_KEY, WRONG_GW, WRONG_AM, CLIENT_KEY]
SECRETS += [INGEST_TOKEN, WRONG_INGEST]
PROMPT = f"Summarize the canary report {secrets.token_hex(8)} for the on-call engineer"


class Loop:
    """The running loop's parts."""

    def __init__(self, tmp: Path, spans: SpanCapture) -> None:
        self.tmp, self.spans = tmp, spans
        self.sim: SimHandle
        self.gw: Service
        self.col: Service
        self.ctl: Service

    def secret(self, name: str, value: str) -> Path:
        return secret_file(self.tmp, name, value)

    def start(self, stack: ExitStack) -> None:
        self.sim = stack.enter_context(
            start_simulator(
                self.tmp,
                otlp_endpoint=self.spans.url,
                api_key=SIM_KEY,
                admin_token_file=self.secret("sim-admin.token", SIM_ADMIN),
            )
        )
        self.gw = stack.enter_context(self._gateway())
        self.col = stack.enter_context(self._collector())
        self.ctl = stack.enter_context(self._controller())

    def _gateway(self) -> AbstractContextManager[Service]:
        port = free_port()
        lane = {"upstreams": [self.sim.url], "api_key_file": str(self.secret("lane.key", SIM_KEY))}
        cfg = {
            "server": {"host": "127.0.0.1", "port": port},
            "lanes": {"fast": lane, "slow": lane},
            "admin_token_file": str(self.secret("gw-admin.token", GW_TOKEN)),
            "otlp_endpoint": self.spans.url,
            "hints": {"trusted_networks": ["127.0.0.0/8"]},  # the test chooses lanes with x-lanewatch-lane
        }
        path = write_yaml(self.tmp / "gateway.yaml", {"gateway": cfg})
        args = ["gateway", "-c", str(path), "--records", str(self.tmp / "tap.jsonl")]
        return service(args, port, self.tmp / "gateway.log", "/metrics")

    def _collector(self) -> AbstractContextManager[Service]:
        port = free_port()
        key, wrong = self.secret("target.key", SIM_KEY), self.secret("wrong.key", WRONG_KEY)
        model = self.sim.model
        targets = [
            {"name": "direct", "url": self.sim.url, "lane": "fast", "model": model, "api_key_file": str(key)},
            {"name": "via-gateway", "url": self.gw.url, "lane": "slow", "model": model, "scrape": False},
            {
                "name": "wrong-key",
                "url": self.sim.url,
                "lane": "fast",
                "model": model,
                "api_key_file": str(wrong),
            },
        ]
        cfg = {
            "targets": targets,
            "probe": {"interval_s": 0.2, "classes": [{"name": "canary", "prompt": PROMPT, "max_tokens": 16}]},
            "scrape": {"interval_s": 0.5},
            "otlp": {"join_wait_s": 0.2},
            "gpu": {"enabled": False},
            "export": {"otlp_endpoint": self.spans.url},
            "server": {"host": "127.0.0.1", "port": port},
            "ingest": {
                "reporters": [
                    {
                        "name": "gw",
                        "token_file": str(self.secret("ingest.token", INGEST_TOKEN)),
                        "feeds": ["tap"],
                    }
                ]
            },
        }
        path = write_yaml(self.tmp / "collect.yaml", cfg)
        args = [
            "collect",
            "-c",
            str(path),
            "--records",
            str(self.tmp / "records.jsonl"),
            "--log-level",
            "debug",
        ]
        return service(args, port, self.tmp / "collect.log", "/healthz")

    def _controller(self) -> AbstractContextManager[Service]:
        port = free_port()
        args = [
            "degrade", "serve", "--host", "127.0.0.1", "--port", str(port),
            "--token-file", str(self.secret("am.token", AM_TOKEN)),
            "--gateway", self.gw.url, "--gateway-token-file", str(self.secret("gw.token", GW_TOKEN)),
            "--state-dir", str(self.tmp / "state"), "--tick-s", "0.05",
        ]  # fmt: skip
        return service(args, port, self.tmp / "degrade.log", "/healthz")


def drive(loop: Loop) -> str:
    """Traffic, a degrade and every wrong token; returns the response text clients got."""
    gw, ctl, sim = loop.gw, loop.ctl, loop.sim
    chat = {"model": sim.model, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 16}
    with httpx.Client(timeout=10) as c:
        # what the collector's probes get back (same prompt and length: the same text)
        r = c.post(
            f"{sim.url}/v1/chat/completions", json=chat, headers={"authorization": f"Bearer {SIM_KEY}"}
        )
        assert r.status_code == 200, r.text
        response_text = r.json()["choices"][0]["message"]["content"]
        assert c.post(f"{sim.url}/v1/chat/completions", json=chat).status_code == 401
        for stream in (True, False):
            r = c.post(
                f"{gw.url}/v1/chat/completions",
                json={**chat, "stream": stream},
                headers={"authorization": f"Bearer {CLIENT_KEY}", "x-lanewatch-lane": "slow"},
            )
            assert r.status_code == 200, r.text
        wrong = {"authorization": f"Bearer {WRONG_GW}"}
        assert c.put(f"{gw.url}/admin/degrade", json={"lanes": {}}, headers=wrong).status_code == 401
        assert c.post(f"{sim.url}/admin/faults", json={}, headers=wrong).status_code == 401
        # the collector's ingest: a wrong token, then the right one sending a source it may not
        ingest = f"{loop.col.url}/v1/records"
        wrong_ingest = {"authorization": f"Bearer {WRONG_INGEST}"}
        assert c.post(ingest, json={"records": []}, headers=wrong_ingest).status_code == 401
        right = {"authorization": f"Bearer {INGEST_TOKEN}"}
        assert c.post(ingest, json={"records": []}, headers=right).status_code == 200
        foreign = RequestTiming("litellm", "t", "fast", "interactive", "m", started_at=time.time(), e2e_s=1.0)
        batch = encode_batch([encode_record(foreign)])
        json_ = {"content-type": "application/json"}
        assert c.post(ingest, content=batch, headers={**right, **json_}).status_code == 403
        firing = body(alert("firing", starts=time.time()))
        r = c.post(f"{ctl.url}/alertmanager", json=firing, headers={"authorization": f"Bearer {WRONG_AM}"})
        assert r.status_code == 401
        r = c.post(f"{ctl.url}/alertmanager", json=firing, headers={"authorization": f"Bearer {AM_TOKEN}"})
        assert r.json()["outcomes"] == {"fired": 1}, r.text
        admin = {"authorization": f"Bearer {GW_TOKEN}"}
        eventually(
            lambda: c.get(f"{gw.url}/admin/degrade", headers=admin).json()["lanes"],
            10,
            "the controller degrades the gateway",
        )
    return str(response_text)


def records(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a records file."""
    lines = path.read_text().splitlines(keepends=True) if path.exists() else []
    return [json.loads(x) for x in lines if x.endswith("\n")]


def settle(loop: Loop) -> None:
    """Wait until the collector has probed every target a few times."""

    def probed() -> bool:
        seen = Counter(r["target"] for r in records(loop.tmp / "records.jsonl"))
        return min(seen[t] for t in ("direct", "via-gateway", "wrong-key")) >= 3

    eventually(probed, 20, "three probes of each target", every_s=0.2, context=lambda: loop.col.log()[-3000:])


def pages(loop: Loop) -> dict[str, str]:
    """Every page a scraper or an operator reads."""
    gw_admin = {"authorization": f"Bearer {GW_TOKEN}"}
    out = {}
    with httpx.Client(timeout=10) as c:
        for name, url in {
            "sim /metrics": f"{loop.sim.url}/metrics",
            "gateway /metrics": f"{loop.gw.url}/metrics",
            "gateway /healthz": f"{loop.gw.url}/healthz",
            "collector /metrics": f"{loop.col.url}/metrics",
            "collector /healthz": f"{loop.col.url}/healthz",
            "degrade /metrics": f"{loop.ctl.url}/metrics",
            "degrade /healthz": f"{loop.ctl.url}/healthz",
        }.items():
            out[name] = c.get(url).text
        out["gateway /admin/degrade"] = c.get(f"{loop.gw.url}/admin/degrade", headers=gw_admin).text
    return out


def test_no_secret_prompt_or_response_text_in_any_output(tmp_path: Path) -> None:
    with span_capture() as spans, ExitStack() as stack:
        loop = Loop(tmp_path, spans)
        loop.start(stack)
        response_text = drive(loop)
        settle(loop)
        outputs = pages(loop)
        stack.close()  # every process stops: logs complete, spans flushed
        logs = {p.name: p.read_text(errors="replace") for p in tmp_path.rglob("*.log")}
        outputs |= {f"log {name}": text for name, text in logs.items()}
        for records in ("records.jsonl", "tap.jsonl"):
            outputs[records] = (tmp_path / records).read_text()
        for f in (tmp_path / "state").iterdir():
            outputs[f"state {f.name}"] = f.read_bytes().decode("latin-1")
        status = CliRunner().invoke(
            cli, ["degrade", "status", "--state-dir", str(tmp_path / "state"), "--json"]
        )
        outputs["degrade status"] = status.stdout
        outputs |= {f"spans #{i}": b.decode("latin-1") for i, b in enumerate(spans.bodies)}
    assert_the_loop_ran(outputs, spans, logs, tmp_path)
    assert len(response_text) > 40
    for name, text in outputs.items():
        for needle in [*SECRETS, PROMPT, response_text]:
            assert needle not in text, f"{needle[:20]}… found in {name}"


def assert_the_loop_ran(outputs: dict[str, str], spans: SpanCapture, logs: dict[str, str], tmp: Path) -> None:
    """The scan read real outputs: every service logged, exported spans, wrote records and state."""
    assert spans.services() >= {"vllm", "lanewatch-gateway", "lanewatch-collector"}, spans.services()
    probes = {(r["target"], r["error"]) for r in records(tmp / "records.jsonl")}
    assert {("direct", None), ("via-gateway", None), ("wrong-key", "http_4xx")} <= probes, probes
    assert any(r["status"] == 200 and r["error"] is None for r in records(tmp / "tap.jsonl"))
    assert json.loads(outputs["gateway /admin/degrade"])["lanes"]["slow"]["shift_to"] == "fast"
    assert [e["event"] for e in json.loads(outputs["degrade status"])["audit"]][:2] == ["fired", "apply"]
    assert "lanewatch_ttft_seconds_count" in outputs["collector /metrics"]
    assert len(logs) == 4 and all(logs.values()), {k: len(v) for k, v in logs.items()}
    # what may pass does, so the scan reads the very text a leak would be in
    assert any("Llama-3.2-1B-Instruct" in text for name, text in outputs.items() if name.startswith("spans"))
    assert 'target="wrong-key"' in outputs["collector /metrics"] and '"canary"' in outputs["records.jsonl"]
