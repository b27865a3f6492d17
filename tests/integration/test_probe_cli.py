"""`lanewatch probe` as a user runs it, against a scripted server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.servers import closed_port

from .scripted_server import Reply, ScriptedServer, chat_stream

pytestmark = pytest.mark.integration

LANEWATCH = str(Path(sys.executable).parent / "lanewatch")
KEYS = {"request_id", "dns_s", "connect_s", "tls_s", "send_s", "ttfb_s", "ttft_s", "tpot_s", "e2e_s",
        "prompt_tokens", "output_tokens", "error"}  # fmt: skip


async def lanewatch(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        LANEWATCH, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_json_lines_one_per_request_and_exit_1_on_any_failure(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("sk-NEVER-PRINTED")
    replies = iter(
        # Tokens 5 ms apart: tokens that arrive in one read are stamped together (ITL 0).
        [
            Reply(parts=chat_stream(4, gap=0.005)),
            Reply(status=503, parts=[(0.0, b"{}")]),
            Reply(parts=chat_stream(4)),
        ]
    )
    async with ScriptedServer(lambda r: next(replies)) as srv:
        code, out, err = await lanewatch(
            "probe",
            srv.url("localhost"),
            "--model",
            "m",
            "-n",
            "3",
            "--json",
            "--cold",
            "--api-key-file",
            str(key),
        )
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 3, err
    assert all(set(line) >= KEYS for line in lines)
    assert [line["error"] for line in lines] == [None, "http_5xx", None]
    assert lines[0]["output_tokens"] == 4 and lines[0]["dns_s"] > 0 and lines[0]["tpot_s"] > 0
    assert code == 1
    assert "NEVER-PRINTED" not in out + err
    assert srv.received[0].headers["authorization"] == "Bearer sk-NEVER-PRINTED"


async def test_json_shows_prompt_and_response_text_only_with_record_content() -> None:
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(3))) as srv:
        _, plain, _ = await lanewatch("probe", srv.url(), "-m", "m", "--json")
        code, out, err = await lanewatch("probe", srv.url(), "-m", "m", "--json", "--record-content")
    assert code == 0, err
    first, sent = (str(r.json()["messages"][0]["content"]) for r in srv.received)
    assert not {"prompt_text", "response_text"} & set(json.loads(plain))  # nothing new by default
    assert first not in plain and "t0 t1" not in plain
    line = json.loads(out)
    assert (line["prompt_text"], line["response_text"]) == (sent, "t0 t1 t2 ")


async def test_table_shows_every_phase_and_exit_0() -> None:
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(3, gap=0.002))) as srv:
        code, out, err = await lanewatch("probe", srv.url(), "-m", "m", "-n", "4", "--class", "story")
    assert code == 0, err
    for phase in ("dns", "connect", "tls", "send", "ttfb", "ttft", "itl", "tpot", "e2e", "p50 ms", "p99 ms"):
        assert phase in out
    assert "ok 4/4" in out
    assert srv.received[0].json()["max_tokens"] == 256  # the default story class
    assert "goodput: no latency SLO for lane 'default'" in " ".join(out.split())  # bundled: fast, slow


async def test_summary_line_gives_goodput_against_the_lanes_slos(tmp_path: Path) -> None:
    spec = tmp_path / "slos.yaml"
    spec.write_text(
        "apiVersion: lanewatch/v1\nkind: SLOSpec\nmetadata: {name: t}\nspec:\n  slos:\n"
        "    - {name: ttft, lanes: [slow], objective: 99, latency: {metric: ttft, threshold: 30.0}}\n"
        "    - {name: e2e, lanes: [fast], objective: 99, latency: {metric: e2e, threshold: 0.001}}\n"
    )
    async with ScriptedServer(lambda r: Reply(parts=chat_stream(3, gap=0.01))) as srv:
        args = ("probe", srv.url(), "-m", "m", "-n", "3", "--slo-spec", str(spec))
        code, out, err = await lanewatch(*args, "--lane", "slow")
        assert code == 0, err
        assert "goodput 100.0% (3/3 met ttft ≤ 30s and did not fail)" in " ".join(out.split())
        code, out, err = await lanewatch(*args, "--lane", "fast")  # every answer takes over 1 ms
        assert code == 0, err
        assert "goodput 0.0% (0/3 met e2e ≤ 0.001s and did not fail)" in " ".join(out.split())


async def test_a_bad_slo_spec_is_refused_naming_the_field(tmp_path: Path) -> None:
    spec = tmp_path / "slos.yaml"
    spec.write_text("apiVersion: lanewatch/v1\nkind: SLOSpec\nmetadata: {name: t}\nspec: {period: soon}\n")
    code, _, err = await lanewatch("probe", "http://127.0.0.1:1", "-m", "m", "--slo-spec", str(spec))
    assert code == 2 and "--slo-spec: invalid SLO spec" in err and "spec.period" in err


async def test_failures_are_lines_with_their_kind_not_a_crash() -> None:
    code, _, err = await lanewatch("probe", f"http://127.0.0.1:{closed_port()}", "-m", "m", "-n", "2")
    assert code == 1
    assert "error connect_refused: 2 of 2" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--class", "nope"], "unknown class 'nope'"),
        (["--cacert", __file__, "-k"], "either --cacert or -k"),
        (["--api-key-file", "/nonexistent/key"], "api_key_file"),
    ],
)
async def test_bad_options_exit_2_with_a_clear_message(args: list[str], message: str) -> None:
    code, _, err = await lanewatch("probe", "http://127.0.0.1:9", "-m", "m", *args)
    assert code == 2
    assert message in err
