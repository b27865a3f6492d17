"""`lanewatch gateway` as a process: flags, /metrics, the records file, the admin token, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.exporters import names

from .gateway_harness import chat_body, start_gateway, start_test_upstream

pytestmark = pytest.mark.integration


def _sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    raise AssertionError(f"no sample {name}{labels}")


def test_gateway_process_serves_metrics_records_and_admin(tmp_path: Path) -> None:
    token = tmp_path / "admin.token"
    token.write_text("tok-123\n")
    records = tmp_path / "records.jsonl"
    flags = ["--admin-token-file", str(token), "--records", str(records), "--trust-hints", "127.0.0.0/8"]
    auth = {"Authorization": "Bearer tok-123"}
    degrade = {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 100, "shed_classes": ["batch"]}}}
    batch = {"x-lanewatch-class": "batch"}
    with (
        start_test_upstream(tmp_path, first_ms=1, gap_ms=1) as fast,
        start_test_upstream(tmp_path, first_ms=1, gap_ms=1) as slow,
        start_gateway(tmp_path, [f"fast={fast}", f"slow={slow}"], *flags) as gw,
        httpx.Client(base_url=gw.url, timeout=10) as client,
    ):
        assert client.put("/admin/degrade", json=degrade).status_code == 401
        assert client.put("/admin/degrade", json=degrade, headers=auth).json()["version"] == 1
        r = client.post("/v1/chat/completions", json=chat_body(3))
        assert r.status_code == 200 and r.headers["x-lanewatch-lane"] == "fast"
        assert r.headers["x-lanewatch-degraded"] == "shift"
        assert client.post("/v1/chat/completions", json=chat_body(), headers=batch).status_code == 429
        text = client.get("/metrics").text
    up = fast.removeprefix("http://")
    assert _sample(text, names.GATEWAY_REQUESTS_TOTAL, lane="slow", served_lane="fast", degraded="shift") == 1
    assert _sample(text, names.GATEWAY_SHED_TOTAL, lane="slow", request_class="batch") == 1
    assert _sample(text, names.GATEWAY_DEGRADE_APPLIED_TOTAL, lane="slow", action="shift") == 1
    assert _sample(text, names.GATEWAY_UPSTREAM_HEALTHY, lane="fast", upstream=up) == 1
    assert _sample(text, names.GATEWAY_INFLIGHT, lane="fast", upstream=up) == 0
    assert _sample(text, names.GATEWAY_DEGRADE_STATE_VERSION) == 1
    tap = {"target": up, "lane": "fast", "request_class": "interactive", "model": "test-model"}
    tap["source"] = "tap"
    assert _sample(text, names.REQUESTS_TOTAL, **tap) == 1  # the tap's records, as the prober's are exported
    assert _sample(text, names.TTFT_SECONDS + "_count", **tap) == 1
    assert _sample(text, names.TOKENS_TOTAL, **tap, token_type="output") == 3
    (line,) = records.read_text().splitlines()  # the shed request was not proxied, so not tapped
    rec = json.loads(line)
    assert (rec["source"], rec["lane"], rec["output_tokens"], rec["attrs"]["routed_lane"]) == (
        "tap",
        "fast",
        3,
        "slow",
    )
    assert "tok-123" not in gw.log_path.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--upstream", "fast"], "expected LANE=URL"),
        (["--upstream", "fast=ftp://x"], "must start with http://"),
        ([], "no lanes"),
        (["--upstream", "fast=http://a:1", "--lane-order", "fast,slow"], "gateway: unknown lanes ['slow']"),
        (["--upstream", "fast=http://a:1", "--default-lane", "slow"], "gateway: unknown lanes ['slow']"),
        (["--upstream", "fast=http://a:1", "--model", "small"], "expected LANE=NAME"),
        (["--upstream", "fast=http://a:1", "--model", "mid=small"], "no lane 'mid'; lanes: fast"),
    ],
)
def test_bad_flags_exit_2_naming_the_problem(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["gateway", *args])
    assert result.exit_code == 2 and message in result.output
    assert "input_value" not in result.output  # no pydantic dump of the settings


def test_bad_config_file_names_field_and_line(tmp_path: Path) -> None:
    cfg = tmp_path / "gw.yaml"
    cfg.write_text(
        "gateway:\n  lanes:\n    fast: {upstreams: [http://127.0.0.1:9]}\n  shift_mode: sideways\n"
    )
    result = CliRunner().invoke(app, ["gateway", "-c", str(cfg)])
    assert result.exit_code == 2 and "gateway.shift_mode (line 4)" in result.output


def test_environment_overrides_apply_without_a_config_file() -> None:
    # a process with a deadline: were the override ignored, the gateway would serve for ever
    env = {**os.environ, "LANEWATCH__GATEWAY__DEFAULT_LANE": "batchlane"}
    cmd = [str(Path(sys.executable).parent / "lanewatch"), "gateway", "--upstream", "fast=http://127.0.0.1:9"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "gateway: unknown lanes ['batchlane']" in done.stderr


def test_model_flags_declare_lane_models(tmp_path: Path) -> None:
    with (
        start_test_upstream(tmp_path, first_ms=1.0, gap_ms=1.0) as up,
        start_gateway(
            tmp_path,
            [f"fast={up}", f"slow={up}"],
            *("--model", "fast=small", "--model", "slow=big", "--trust-hints", "127.0.0.1/32"),
        ) as gw,
    ):
        url = f"{gw.url}/v1/chat/completions"
        shifted = httpx.post(url, json=chat_body(model="big"), headers={"x-lanewatch-lane": "fast"})
        unknown = httpx.post(url, json=chat_body(model="gpt-4o"))
    assert shifted.status_code == 200 and shifted.headers["x-lanewatch-model"] == "big -> small"
    assert unknown.status_code == 404
    assert "Lanes serve fast: small; slow: big." in unknown.json()["error"]["message"]


def _gateway_exits(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the gateway expecting it to refuse to start (a deadline, in case it serves instead)."""
    cmd = [str(Path(sys.executable).parent / "lanewatch"), "gateway", "--upstream", "fast=http://127.0.0.1:9"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("content", "flag", "message"),
    [
        (b"", "--admin-token-file", "admin_token_file {path}: the file is empty"),
        (None, "--admin-token-file", "admin_token_file {path}: cannot read: No such file or directory"),
        (b"\xff\xfetok", "--admin-token-file", "admin_token_file {path}: cannot read: 'utf-8' codec"),
        (b"a b", "--admin-token-file", "admin_token_file {path}: whitespace inside the secret"),
        (None, "--records", "records file {path}: cannot open: No such file or directory"),
    ],
)
def test_start_up_errors_are_one_line_and_exit_2(
    tmp_path: Path, content: bytes | None, flag: str, message: str
) -> None:
    path = tmp_path / "file"
    if content is not None:
        path.write_bytes(content)
    elif flag == "--records":
        path = Path("/proc/no-such-dir/records.jsonl")
    done = _gateway_exits("--port", "0", flag, str(path))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("lanewatch gateway: " + message.format(path=path)), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_taken_port_is_one_line_and_exit_1() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _gateway_exits("--host", "127.0.0.1", "--port", str(port))
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"lanewatch gateway: cannot listen on 127.0.0.1:{port}: "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr  # no unclosed-session noise


def test_admin_insecure_logs_a_loud_warning(tmp_path: Path) -> None:
    with (
        start_test_upstream(tmp_path, first_ms=1, gap_ms=1) as fast,
        start_gateway(tmp_path, [f"fast={fast}"], "--admin-insecure") as gw,
    ):
        log = gw.log_path.read_text()
    assert (
        "WARNING lanewatch.gateway: --admin-insecure: /admin/degrade accepts changes WITHOUT authentication"
        in log
    )
