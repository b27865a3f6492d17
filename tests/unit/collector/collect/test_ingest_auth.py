"""Who may feed the fast guard: the collector refuses to run it open, and one reporter cannot speak
for another (its forged events neither fire nor hide another reporter's lane evidence).

The collector is built as `lanewatch collect` builds it (from_config: the bundled SLO spec, the
slow lane's TTFT SLO 2 s), its app driven in process; the guard is stepped by hand.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from lanewatch.collector.cli import app as cli
from lanewatch.collector.collect.credentials import ANYONE, Credential, IngestAuth, load_ingest_auth
from lanewatch.collector.collect.serve import serve
from lanewatch.collector.collect.service import CollectorService
from lanewatch.collector.collect.settings import IngestConfig
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.common.validation import is_loopback
from lanewatch.collector.config import LanewatchConfig, load_config
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.timing import RequestTiming

QUIET: dict[str, Any] = {
    "scrape": {"enabled": False},
    "gpu": {"enabled": False},
    "probe": {"enabled": False},
    # LiteLLM's finished records judged too (as for a handler that reports no progress)
    "guard": {
        "enabled": True,
        "alertmanager_urls": ["http://127.0.0.1:9"],
        "record_sources": ["envoy", "litellm"],
    },
}
NEEDS = r"guard\.enabled needs ingest\.token_file \(or ingest\.reporters\)"


def tokens(tmp: Path, **named: str) -> dict[str, str]:
    """Write each token to tmp/<name>; the token files by name."""
    out = {}
    for name, token in named.items():
        (tmp / name).write_text(token + "\n")
        out[name] = str(tmp / name)
    return out


def collector(tmp: Path) -> tuple[CollectorService, TestClient]:
    """A guard behind three reporters' tokens: two gateways and a LiteLLM proxy."""
    files = tokens(tmp, eu="eu-t0k", us="us-t0k", lite="lite-t0k")
    reporters = [
        {"name": "gw-eu", "token_file": files["eu"], "feeds": ["progress", "tap"]},
        {"name": "gw-us", "token_file": files["us"], "feeds": ["progress", "tap"]},
        {"name": "litellm", "token_file": files["lite"], "feeds": ["litellm"]},
    ]
    cfg = LanewatchConfig(**QUIET, ingest={"reporters": reporters})
    service = CollectorService.from_config(cfg, source_factory=None)
    return service, TestClient(service.app())


def post_progress(client: TestClient, token: str | None, reporter: str, events: list[list[Any]]) -> int:
    headers = {"content-type": "application/json"}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    body = json.dumps({"reporter": reporter, "events": events})
    return client.post("/v1/progress", content=body, headers=headers).status_code


def verdicts(service: CollectorService) -> dict[str, int]:
    assert service.guard is not None
    return {v: service.guard.verdicts[("slow", v)] for v in ("met", "missed")}


def firing(service: CollectorService) -> bool:
    assert service.guard is not None
    service.guard.evaluate()
    return any(view.firing for view in service.guard.views() if view.lane == "slow")


WAITING_LATE = [[i, "slow", 5.0, False] for i in range(1, 9)]  # 8 requests waiting past the 2 s SLO
MET_FAST = [[i, "slow", 0.1, True] for i in range(1, 9)]  # the same ids, "first token at 0.1 s"


def test_forged_progress_without_the_token_is_refused_and_judged_nothing(tmp_path: Path) -> None:
    service, client = collector(tmp_path)
    assert post_progress(client, None, "gw-eu-1", WAITING_LATE) == 401
    assert post_progress(client, "guessed", "gw-eu-1", WAITING_LATE) == 401
    assert verdicts(service) == {"met": 0, "missed": 0} and not firing(service)


def test_a_reporter_cannot_hide_anothers_outage_with_forged_met_events(tmp_path: Path) -> None:
    """gw-us posts "met" for gw-eu's request ids just ahead of gw-eu's own report: refused, and
    gw-eu's honest misses still fire the lane."""
    service, client = collector(tmp_path)
    assert post_progress(client, "us-t0k", "gw-eu-host-1", MET_FAST) == 403
    assert post_progress(client, "us-t0k", "gw-eu", MET_FAST) == 403
    assert verdicts(service) == {"met": 0, "missed": 0}
    assert post_progress(client, "eu-t0k", "gw-eu-host-1", WAITING_LATE) == 200
    assert verdicts(service) == {"met": 0, "missed": 8}
    assert firing(service)


def test_a_reporter_cannot_fire_a_lane_with_another_reporters_name_or_source(tmp_path: Path) -> None:
    service, client = collector(tmp_path)
    assert post_progress(client, "us-t0k", "gw-eu-host-1", WAITING_LATE) == 403
    assert post_progress(client, "lite-t0k", "litellm-1", WAITING_LATE) == 403  # may not send progress
    late = [
        RequestTiming(
            source="litellm",
            target="proxy",
            lane="slow",
            request_class="interactive",
            model="m",
            started_at=time.time() - 12,
            status=200,
            ttft_s=10.0,
            e2e_s=11.0,
        )
    ] * 8
    body = encode_batch(encode_record(r) for r in late)
    json_ = {"content-type": "application/json"}
    r = client.post("/v1/records", content=body, headers={**json_, "authorization": "Bearer us-t0k"})
    assert r.status_code == 403 and r.json()["error"]["field"] == "source"
    assert "litellm" in r.json()["error"]["message"]
    assert verdicts(service) == {"met": 0, "missed": 0} and not firing(service)
    # its own credential may: the LiteLLM proxy's late records are judged
    r = client.post("/v1/records", content=body, headers={**json_, "authorization": "Bearer lite-t0k"})
    assert r.status_code == 200 and verdicts(service)["missed"] == 8


def test_its_own_name_is_what_a_reporter_may_speak_for(tmp_path: Path) -> None:
    service, client = collector(tmp_path)
    assert post_progress(client, "eu-t0k", "gw-eu", [[1, "slow", 0.1, True]]) == 200
    assert post_progress(client, "eu-t0k", "gw-eu-host-2", [[1, "slow", 0.2, True]]) == 200
    assert post_progress(client, "eu-t0k", "gw-eux", [[1, "slow", 0.2, True]]) == 403
    assert verdicts(service) == {"met": 2, "missed": 0}


def test_envoy_access_logs_need_the_envoy_feed_and_are_keyed_by_the_sender(tmp_path: Path) -> None:
    files = tokens(tmp_path, edge="edge-t0k", gw="gw-t0k")
    reporters = [
        {"name": "envoy-eu", "token_file": files["edge"], "feeds": ["envoy"]},
        {"name": "gw", "token_file": files["gw"], "feeds": ["progress", "tap"]},
    ]
    cfg = LanewatchConfig(**QUIET, ingest={"reporters": reporters})
    service = CollectorService.from_config(cfg, source_factory=None)
    client = TestClient(service.app())
    json_ = {"content-type": "application/json"}
    assert client.post("/v1/logs", content=b"{}", headers=json_).status_code == 401
    denied = client.post("/v1/logs", content=b"{}", headers={**json_, "authorization": "Bearer gw-t0k"})
    assert denied.status_code == 403 and "envoy" in denied.text
    ok = client.post("/v1/logs", content=b"{}", headers={**json_, "authorization": "Bearer edge-t0k"})
    assert ok.status_code == 200
    # spans join records and feed no verdict: any credential sends them, none is open
    assert client.post("/v1/traces", content=b"{}", headers=json_).status_code == 401
    traces = client.post("/v1/traces", content=b"{}", headers={**json_, "authorization": "Bearer gw-t0k"})
    assert traces.status_code == 200


def test_the_collector_refuses_to_run_the_guard_with_its_ingest_open(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=NEEDS):
        LanewatchConfig(**QUIET)
    f = tmp_path / "open.yaml"
    f.write_text("guard:\n  enabled: true\n  alertmanager_urls: ['http://127.0.0.1:9']\n")
    with pytest.raises(ConfigError, match=NEEDS):
        load_config(f)
    res = CliRunner().invoke(cli, ["config", "check", str(f)])
    assert res.exit_code != 0 and "guard.enabled needs ingest.token_file" in res.output
    res = CliRunner().invoke(cli, ["collect", "-c", str(f)])
    assert res.exit_code != 0 and "guard.enabled needs ingest.token_file" in res.output


def test_listening_beyond_loopback_without_a_token_is_refused(tmp_path: Path) -> None:
    for section in ({"server": {"host": "0.0.0.0"}}, {"otlp": {"grpc_listen": "0.0.0.0:4317"}}):
        with pytest.raises(ValueError, match=r"listens beyond loopback and needs ingest\.token_file"):
            LanewatchConfig(**section)  # type: ignore[arg-type]
    assert LanewatchConfig(server={"host": "127.0.0.2"}).ingest.token_file is None  # loopback stays open
    # a flag is laid over the validated file: the collector checks the address it is given too
    res = CliRunner().invoke(cli, ["collect", "--host", "0.0.0.0", "--port", "0"])
    assert res.exit_code != 0 and "server.host '0.0.0.0' listens beyond loopback" in res.output
    service = CollectorService(LanewatchConfig(), source_factory=None)
    with pytest.raises(ConfigError, match="listens beyond loopback"):
        asyncio.run(serve(service, "0.0.0.0", 0, asyncio.Event(), lambda _: None))


def test_a_token_opens_both(tmp_path: Path) -> None:
    files = tokens(tmp_path, shared="s3cret")
    cfg = LanewatchConfig(**QUIET, server={"host": "0.0.0.0"}, ingest={"token_file": files["shared"]})
    service = CollectorService.from_config(cfg, source_factory=None)
    client = TestClient(service.app())
    # the shared token speaks for every reporter
    assert post_progress(client, "s3cret", "anyone-1", WAITING_LATE) == 200
    assert verdicts(service)["missed"] == 8


def test_reporter_names_may_not_nest_nor_tokens_repeat(tmp_path: Path) -> None:
    files = tokens(tmp_path, a="same", b="same", c="other")
    with pytest.raises(ValueError, match="'gw' is a prefix of 'gw-eu'"):
        IngestConfig(
            reporters=[
                {"name": "gw", "token_file": files["a"], "feeds": []},
                {"name": "gw-eu", "token_file": files["c"], "feeds": []},
            ]
        )
    twice = IngestConfig.model_validate(
        {
            "reporters": [
                {"name": "one", "token_file": files["a"], "feeds": []},
                {"name": "two", "token_file": files["b"], "feeds": []},
            ]
        }
    )
    with pytest.raises(ConfigError, match=r"ingest\.reporters\[1\]\.token_file holds the same token") as info:
        load_ingest_auth(twice)
    assert "same" not in str(info.value).replace("the same token", "")


def test_identify_finds_the_credential_and_never_shows_a_token() -> None:
    auth = IngestAuth("shared-t", [(Credential("gw", frozenset({"progress"})), "gw-t")])
    assert auth.identify("Bearer gw-t") == Credential("gw", frozenset({"progress"}))
    assert auth.identify("Bearer shared-t") == Credential(None)
    assert auth.identify("Bearer nope") is None and auth.identify(None) is None
    assert IngestAuth().identify(None) is ANYONE
    assert "gw-t" not in repr(auth) and "shared-t" not in repr(auth)
    assert not Credential("gw").may_report_as("gwx-1") and Credential("gw").may_report_as("gw-1")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.9.9.9", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("", False), ("10.0.0.5", False), ("collector", False)],
)  # fmt: skip
def test_which_listen_hosts_stay_on_this_machine(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_the_gateway_names_its_progress_reports_after_its_credential(tmp_path: Path) -> None:
    from lanewatch.collector.gateway.settings import GatewayConfig
    from lanewatch.collector.gateway.state import Gateway
    from lanewatch.collector.progress.wire import encode_progress, parse_progress

    cfg = GatewayConfig.model_validate(
        {
            "lanes": {"slow": {"upstreams": ["http://127.0.0.1:9"]}},
            "collector_url": "http://127.0.0.1:9",
            "reporter_name": "gateway-eu-west1",  # the longest name: 16 characters
        }
    )
    progress = Gateway(cfg).progress
    assert progress is not None
    reporter = progress.reporter
    assert Credential("gateway-eu-west1").may_report_as(reporter)
    assert parse_progress(encode_progress(reporter, [])).reporter == reporter  # within the wire's 64
    assert GatewayConfig().reporter_name == "gw"
    with pytest.raises(ValueError, match="reporter_name"):
        GatewayConfig(reporter_name="x" * 17)
