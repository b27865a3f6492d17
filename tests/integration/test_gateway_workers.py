"""`lanewatch gateway --workers 2` as processes: one degrade state, one /metrics, records kept
through a worker's crash, restarts, and a drain at SIGTERM.

Which worker served a request is read from its records file (`tap.workerN.jsonl`, one per
worker): each test checks that both workers served, so it is about both. New connections are
spread over the workers by the kernel (SO_REUSEPORT hashes each connection), so every request
here goes on a connection of its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.exporters import names
from tests.servers import free_port, lanewatch_command, started
from tests.waiting import eventually

from .gateway_harness import GatewayProcess, chat_body, start_test_upstream

pytestmark = pytest.mark.integration

TOKEN = "workers-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Connection": "close"}
CLOSE = {"Connection": "close"}
SHIFT = {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 100}}}
START_S = 120.0  # three processes starting on a loaded 2-core machine (measured: 32 s at load 9)


@dataclass(frozen=True)
class Workers:
    """A gateway with two workers and what tells them apart."""

    gw: GatewayProcess
    records: Path

    def lines(self, slot: int) -> list[dict[str, Any]]:
        """The records worker `slot` wrote so far (whole lines only)."""
        path = self.records.with_name(f"{self.records.stem}.worker{slot}{self.records.suffix}")
        if not path.exists():
            return []
        text = path.read_text()
        return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]

    def pids(self) -> dict[int, int]:
        """Worker slot -> pid of its latest process, from the log."""
        found = re.findall(r"worker (\d+) \(pid (\d+)\) listening", self.gw.log_path.read_text())
        return {int(slot): int(pid) for slot, pid in found}


@contextmanager
def two_workers(tmp_path: Path, first_ms: float = 1, gap_ms: float = 1) -> Iterator[Workers]:
    """A gateway with `--workers 2` over one test upstream as lanes fast and slow, once both listen."""
    token = tmp_path / "admin.token"
    token.write_text(TOKEN)
    records = tmp_path / "tap.jsonl"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "gateway.log"
    with start_test_upstream(tmp_path, first_ms=first_ms, gap_ms=gap_ms) as up:
        args = [*lanewatch_command(), "gateway", "--host", "127.0.0.1", "--port", str(port)]
        args += ["--upstream", f"fast={up}", "--upstream", f"slow={up}", "--workers", "2"]
        args += ["--admin-token-file", str(token), "--records", str(records)]
        with started(args, log_path) as proc:

            def listening() -> bool:
                assert proc.poll() is None, log_path.read_text()
                return "; 2 workers" in log_path.read_text()

            eventually(listening, START_S, "both workers listening", context=log_path.read_text)
            yield Workers(GatewayProcess(url, proc, log_path), records)


def _chat(url: str, **body: Any) -> httpx.Response:
    """One request on a connection of its own."""
    return httpx.post(f"{url}/v1/chat/completions", json=chat_body(**body), headers=CLOSE, timeout=30)


def _samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    ]


def test_a_degrade_put_is_honoured_by_every_request_after_its_answer(tmp_path: Path) -> None:
    with two_workers(tmp_path) as w:
        url = w.gw.url
        for rnd in range(3):
            shifted = httpx.put(f"{url}/admin/degrade", json={**SHIFT, "revision": 2 * rnd + 1}, headers=AUTH)
            assert shifted.status_code == 200, shifted.text
            for _ in range(30):  # at once after the answer, each on a new connection: any worker
                r = _chat(url, stream=False, max_tokens=1)
                assert (r.status_code, r.headers["x-lanewatch-lane"]) == (200, "fast"), r.text
            cleared = httpx.put(
                f"{url}/admin/degrade", json={"lanes": {}, "revision": 2 * rnd + 2}, headers=AUTH
            )
            assert cleared.status_code == 200, cleared.text
            for _ in range(30):
                r = _chat(url, stream=False, max_tokens=1)
                assert (r.status_code, r.headers["x-lanewatch-lane"]) == (200, "slow"), r.text
        states = [httpx.get(f"{url}/admin/degrade", headers=AUTH).json() for _ in range(12)]
        assert {(s["version"], s["revision"], json.dumps(s["lanes"])) for s in states} == {(6, 6, "{}")}
        for _ in range(12):  # an older revision is refused by whichever worker takes it
            stale = httpx.put(f"{url}/admin/degrade", json={**SHIFT, "revision": 5}, headers=AUTH)
            assert (stale.status_code, stale.json()["revision"]) == (409, 6)
        assert httpx.get(f"{url}/admin/degrade", headers=AUTH).json()["lanes"] == {}
        served = eventually(lambda: _both_served(w, 180), 60, "180 records from the two workers")
    for lines in served:  # each worker served under both states
        assert {line["lane"] for line in lines} == {"fast", "slow"}


def _both_served(w: Workers, total: int) -> tuple[list[dict[str, Any]], ...]:
    """Both workers' records once there are `total` and each wrote some; else ()."""
    lines = (w.lines(1), w.lines(2))
    return lines if sum(map(len, lines)) == total and all(lines) else ()


def test_one_scrape_counts_every_workers_requests_once(tmp_path: Path) -> None:
    with two_workers(tmp_path) as w:
        sent = 40
        for i in range(sent):
            assert _chat(w.gw.url, stream=i % 2 == 0, max_tokens=2).status_code == 200
        assert eventually(lambda: _both_served(w, sent), 60, f"{sent} records from the two workers")

        def scrape() -> str:
            text = httpx.get(f"{w.gw.url}/metrics", headers=CLOSE).text
            tapped = sum(v for _, v in _samples(text, names.REQUESTS_TOTAL))
            return text if tapped == sent else ""

        text = eventually(scrape, 60, f"the tap's {sent} requests in one scrape")
        pages = [text, *(httpx.get(f"{w.gw.url}/metrics", headers=CLOSE).text for _ in range(5))]
    for page in pages:  # whichever worker answers the scrape, it counts both workers' requests, once
        assert sum(v for _, v in _samples(page, names.GATEWAY_REQUESTS_TOTAL)) == sent
        assert sum(v for _, v in _samples(page, names.E2E_SECONDS + "_count")) == sent
        assert sum(v for _, v in _samples(page, names.TTFT_SECONDS + "_count")) == sent // 2  # streamed
        assert _samples(page, names.GATEWAY_DEGRADE_STATE_VERSION) == [({}, 0.0)]
        labelled = [
            s for f in text_string_to_metric_families(page) for s in f.samples if "worker" in s.labels
        ]
        assert labelled == []


async def _stream(url: str, trace: str, tokens: int, started: asyncio.Event, opened: list[str]) -> bool:
    """One streamed request on its own connection; True when it ended with [DONE]."""
    headers = {"traceparent": f"00-{trace}-{secrets.token_hex(8)}-01"}
    body = chat_body(tokens)
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as s,
            s.post(f"{url}/v1/chat/completions", json=body, headers=headers) as resp,
        ):
            data = b""
            async for chunk in resp.content.iter_any():
                if not data:
                    opened.append(trace)
                    started.set()
                data += chunk
            return resp.status == 200 and b"data: [DONE]" in data and b'"error"' not in data
    except (TimeoutError, aiohttp.ClientError):
        return False


async def _streams_around(url: str, count: int, tokens: int, act: Any) -> dict[str, bool]:
    """`count` streams at once; `act()` (run in a thread) once every one has its first bytes."""
    traces = [secrets.token_hex(16) for _ in range(count)]
    opened: list[str] = []
    started = asyncio.Event()
    tasks = [asyncio.create_task(_stream(url, t, tokens, started, opened)) for t in traces]
    for _ in range(1200):  # 60 s at most for every stream to start
        if len(opened) == count or all(t.done() for t in tasks):
            break
        await asyncio.sleep(0.05)
    assert len(opened) == count, f"{len(opened)} of {count} streams started"
    await asyncio.to_thread(act)
    results = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    return dict(zip(traces, results, strict=True))


def test_a_killed_worker_loses_no_stream_of_the_other_and_no_record(tmp_path: Path) -> None:
    with two_workers(tmp_path, first_ms=1, gap_ms=50) as w:
        for _ in range(16):  # records both workers wrote before the crash
            assert _chat(w.gw.url, stream=False, max_tokens=1).status_code == 200
        eventually(lambda: _both_served(w, 16), 60, "16 records from the two workers")
        before = w.lines(1), w.lines(2)
        assert _admitted(w) == 16  # the supervisor now holds both workers' pages
        victim = w.pids()[1]
        # 24 streams of 30 chunks 50 ms apart (1.5 s); worker 1 is killed while all are open
        results = asyncio.run(_streams_around(w.gw.url, 24, 30, lambda: os.kill(victim, signal.SIGKILL)))
        eventually(
            lambda: len(w.lines(2)) - len(before[1]) == sum(results.values()),
            60,
            "a record per finished stream",
        )
        survivor = w.lines(2)[len(before[1]) :]
        on_two = {line["trace_id"] for line in survivor}
        assert all(results[t] for t in on_two), "a stream on the surviving worker broke"
        assert {t for t, ok in results.items() if ok} == on_two  # the broken ones were worker 1's
        assert len(on_two) < len(results), "no stream was on the killed worker"
        assert all(line["error"] is None for line in survivor)
        assert w.lines(1) == before[0]  # what it had written stays, nothing twice
        eventually(
            lambda: w.pids()[1] != victim, 120, "worker 1 started again", context=w.gw.log_path.read_text
        )
        assert f"worker 1 (pid {victim}) exited with status -9" in w.gw.log_path.read_text()
        # What the killed worker had counted by the last scrape stays in the sums (no counter reset);
        # what it admitted after that (its streams) died with it.
        assert _admitted(w) == 16 + len(on_two)

        def worker_one_serves() -> bool:
            assert _chat(w.gw.url, stream=False, max_tokens=1).status_code == 200
            return len(w.lines(1)) > len(before[0])

        eventually(worker_one_serves, 60, "the new worker 1 serving and appending to its file")
        assert w.lines(1)[: len(before[0])] == before[0]


def _admitted(w: Workers) -> float:
    page = httpx.get(f"{w.gw.url}/metrics", headers=CLOSE).text
    return sum(v for _, v in _samples(page, names.GATEWAY_REQUESTS_TOTAL))


def test_sigterm_drains_every_worker(tmp_path: Path) -> None:
    with two_workers(tmp_path, first_ms=1, gap_ms=50) as w:
        proc = w.gw.process

        def terminate() -> None:
            proc.send_signal(signal.SIGTERM)

        results = asyncio.run(_streams_around(w.gw.url, 20, 30, terminate))
        code = proc.wait(timeout=30)
        served = w.lines(1), w.lines(2)
    assert all(results.values()), f"{sum(not ok for ok in results.values())} streams cut at SIGTERM"
    assert code == 0
    assert all(served) and sum(map(len, served)) == 20  # both workers had streams, and finished them
    assert all(line["error"] is None for lines in served for line in lines)


def test_a_taken_port_is_one_line_with_workers() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = ["gateway", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"]
        done = subprocess.run(
            [*lanewatch_command(), *args, "--upstream", "fast=http://127.0.0.1:9"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"lanewatch gateway: cannot listen on 127.0.0.1:{port}: "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_a_workers_records_file_that_cannot_open_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "tap.worker2.jsonl").mkdir()  # worker 1's file opens; worker 2's cannot
    args = ["gateway", "--port", str(free_port()), "--workers", "2", "--records", str(tmp_path / "tap.jsonl")]
    done = subprocess.run(
        [*lanewatch_command(), *args, "--upstream", "fast=http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr
        == f"lanewatch gateway: records file {tmp_path}/tap.worker2.jsonl: cannot open: Is a directory\n"
    )
