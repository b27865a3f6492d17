"""`lanewatch probe --otlp-listen`: vLLM's spans received by the prober itself and joined to its records."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect.otlp_http import SpanReceiver
from lanewatch.collector.collect.otlp_wire import JSON, PROTOBUF
from lanewatch.collector.record.evidence import ServerSpan
from tests.servers import SimHandle, free_port, start_simulator
from tests.unit.collector.collect.test_otlp import VLLM_ATTRS, json_body, protobuf_body, sdk_spans

from .test_probe_cli import LANEWATCH, lanewatch

pytestmark = pytest.mark.integration

PHASES = ("queue", "prefill", "decode")


def assert_phases_match_truth(sim: SimHandle, lines: list[dict[str, Any]]) -> None:
    for line in lines:
        truth = sim.truth(line["request_id"])
        assert line["trace_id"] == truth["trace_id"]
        for phase in PHASES:
            assert abs(line[f"{phase}_s"] - truth[f"{phase}_s"]) <= 0.002, (phase, line, truth)


async def test_every_probe_joins_its_span_and_the_phases_match_the_truth(tmp_path: Path) -> None:
    port = free_port()
    with start_simulator(tmp_path, otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces") as sim:
        code, out, err = await lanewatch(
            "probe", sim.url, "-m", sim.model, "-n", "12", "--class", "short", "--json",
            "--otlp-listen", f"127.0.0.1:{port}",
        )  # fmt: skip
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == 12 and all(line["error"] is None for line in lines)
        assert all(line[f"{p}_s"] is not None for line in lines for p in PHASES), out
        assert_phases_match_truth(sim, lines)
        assert f"--otlp-traces-endpoint http://127.0.0.1:{port}/v1/traces" in err
        assert "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf" in err

        # The table gains the server rows, and says how many joined.
        code, out, err = await lanewatch(
            "probe", sim.url, "-m", sim.model, "-n", "3", "--otlp-listen", f"127.0.0.1:{port}"
        )
        assert code == 0, err
        for row in PHASES:
            assert re.search(rf"│ {row} +│ +\d+\.\d\d │", out), out
        assert "server spans joined 3/3" in out
    # (No run here without a receiver: the sim's exporter would retry a closed port for seconds at exit.)


async def test_without_spans_records_leave_unjoined_after_join_wait_and_on_ctrl_c(tmp_path: Path) -> None:
    with start_simulator(tmp_path) as sim:  # exports no spans
        started = time.monotonic()
        code, out, err = await lanewatch(
            "probe", sim.url, "-m", sim.model, "-n", "2", "--json", "--otlp-listen", "0", "--join-wait", "1"
        )
        took, ended = time.monotonic() - started, time.time()
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == 2 and all(line[f"{p}_s"] is None for line in lines for p in PHASES)
        assert lines[0]["started_at"] < lines[1]["started_at"]  # probe order
        found = re.search(r"--otlp-traces-endpoint http://127\.0\.0\.1:(\d+)/v1/traces", err)
        assert found is not None and int(found.group(1)) > 0, err
        assert took < 30  # a wait that never ended would hit the 60 s limit
        assert ended >= waited_until(lines[-1], 1.0)  # the last record waited out its 1 s

        # Ctrl-C while records wait: each still goes out once, after its wait, in order; exit 130.
        before = finished_requests(sim)
        proc = await asyncio.create_subprocess_exec(
            LANEWATCH, "probe", sim.url, "-m", sim.model, "-n", "1000", "--interval", "0.05", "--json",
            "--otlp-listen", "0", "--join-wait", "1",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not ignored as in a bg job
        )  # fmt: skip
        assert proc.stdout is not None
        first = await asyncio.wait_for(proc.stdout.readline(), 30)  # the first probe's wait ran out
        proc.send_signal(signal.SIGINT)
        rest, err_bytes = await asyncio.wait_for(proc.communicate(), 30)
        ended = time.time()
        lines = [json.loads(line) for line in (first + rest).decode().splitlines()]
        finished = finished_requests(sim) - before
    assert proc.returncode == 130, err_bytes.decode()
    assert "Traceback" not in err_bytes.decode()
    starts = [line["started_at"] for line in lines]
    assert starts == sorted(starts) and len({line["request_id"] for line in lines}) == len(lines)
    assert all(line[f"{p}_s"] is None for line in lines for p in PHASES)
    assert ended >= waited_until(lines[-1], 1.0)  # Ctrl-C did not cut the last record's wait short
    # Every probe the sim finished was printed, but the one in flight at Ctrl-C (cancelled, no record).
    assert len(lines) >= 5 and finished - 1 <= len(lines) <= finished, (len(lines), finished)


def waited_until(line: dict[str, Any], wait_s: float) -> float:
    """The earliest wall time a record could leave: its probe's end plus its wait (less clock slack)."""
    return float(line["started_at"] + line["e2e_s"] + wait_s - 0.01)


def finished_requests(sim: SimHandle) -> int:
    """Requests the sim finished (any reason but abort), from its /metrics."""
    text = httpx.get(f"{sim.url}/metrics").text
    return round(
        sum(
            s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "vllm:request_success_total" and s.labels["finished_reason"] != "abort"
        )
    )


async def test_bad_or_taken_listen_address_exits_2_naming_the_option() -> None:
    code, _, err = await lanewatch("probe", "http://127.0.0.1:9", "-m", "m", "--otlp-listen", "host:")
    assert code == 2 and "--otlp-listen" in err and "[HOST:]PORT" in err
    with socket_taken() as port:
        code, _, err = await lanewatch("probe", "http://127.0.0.1:9", "-m", "m", "--otlp-listen", str(port))
    assert code == 2 and f"--otlp-listen {port}: cannot listen: Address already in use" in err
    assert "Traceback" not in err


@contextmanager
def socket_taken() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def test_receiver_thread_decodes_protobuf_and_json_and_refuses_other_media() -> None:
    got: list[tuple[str, list[ServerSpan]]] = []
    receiver = SpanReceiver(
        "127.0.0.1", 0, lambda spans: got.append((threading.current_thread().name, spans))
    )
    port = receiver.start()
    try:
        url = f"http://127.0.0.1:{port}/v1/traces"
        spans = sdk_spans(2)
        r1 = httpx.post(url, content=protobuf_body(spans), headers={"content-type": PROTOBUF})
        r2 = httpx.post(url, content=json_body("ab" * 16, VLLM_ATTRS), headers={"content-type": JSON})
        r3 = httpx.post(url, content=b"{}", headers={"content-type": "text/plain"})
    finally:
        receiver.shutdown()
    assert (r1.status_code, r2.status_code, r3.status_code) == (200, 200, 415)
    assert [len(s) for _, s in got if s] == [2, 1]  # the 415 carried none
    assert {name for name, _ in got} == {"otlp-receiver"}  # decoded on the receiver's thread
    assert (
        got[1][1][0].trace_id == "ab" * 16
        and got[1][1][0].queue_s == VLLM_ATTRS["gen_ai.latency.time_in_queue"]
    )
    assert f"{spans[0].context.trace_id:032x}" in {s.trace_id for s in got[0][1]}
    with pytest.raises(httpx.ConnectError):
        httpx.post(url, content=b"", headers={"content-type": JSON})
