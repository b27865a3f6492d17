"""Envoy's access log over a cluster of two collectors, as a fleet runs it.

Real Envoy 1.40 on deploy/envoy/access-log.yaml with its `lanewatch_collector` cluster holding
two `lanewatch collect` processes (random, with the outlier detection that file suggests).
Envoy's OTLP logger sends each batch as one OTLP/HTTP call, and each call goes to one collector:
the records spread over both, each request's record on exactly one. The simulators export their
`llm_request` spans to the first collector only, so only records that land there join a span: a
fleet routes spans and records by trace id to the same collector, or goes without the join. Then
one collector is killed with SIGKILL: Envoy ejects it on its first refused call, and the records
lost are only those of the one call that found it dead.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from lanewatch.collector.record.files import read_records
from lanewatch.collector.record.timing import RequestTiming
from tests.envoy import access_log_bootstrap, start_envoy
from tests.servers import free_port, lanewatch_command, run_service, start_simulator
from tests.waiting import eventually

from .test_envoy_tap import send_all

pytestmark = pytest.mark.integration

TOKEN = "envoy-fleet-token"
REQUESTS = 100


@contextmanager
def collector(folder: Path, port: int, grpc_port: int) -> Iterator[tuple[Any, Path]]:
    """One `lanewatch collect` on `port` (Envoy's OTLP/HTTP) and `grpc_port` (the simulators' spans):
    (its process, its records file)."""
    folder.mkdir(parents=True)
    (folder / "token").write_text(TOKEN + "\n")
    config = {
        "gpu": {"enabled": False},
        "scrape": {"enabled": False},
        "probe": {"enabled": False},
        "otlp": {"join_wait_s": 5.0},
        "ingest": {"token_file": str(folder / "token")},
    }
    (folder / "collect.yaml").write_text(json.dumps(config))
    records = folder / "records.jsonl"
    args = [*lanewatch_command(), "collect", "-c", str(folder / "collect.yaml"), "--port", str(port),
            "--records", str(records), "--otlp-grpc-listen", f"127.0.0.1:{grpc_port}"]  # fmt: skip
    with run_service(args, folder / "collect.log", f"http://127.0.0.1:{port}/healthz") as proc:
        yield proc, records


def two_collectors(bootstrap: tuple[dict[str, Any], int, int], ports: list[int]) -> None:
    """The shipped collector cluster (random, ejecting a dead one) with both collectors; the logger's
    batches 0.05 s apart, not 1 s, so the test's few seconds of requests make dozens of calls."""
    config = bootstrap[0]
    cluster = next(c for c in config["static_resources"]["clusters"] if c["name"] == "lanewatch_collector")
    assert cluster["lb_policy"] == "RANDOM"
    assert cluster["outlier_detection"]["consecutive_local_origin_failure"] == 1
    hcm = config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["access_log"][0]["typed_config"]["buffer_flush_interval"] = "0.05s"
    endpoints = [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": p}}}}
                 for p in ports]  # fmt: skip
    cluster["load_assignment"]["endpoints"] = [{"lb_endpoints": endpoints}]


def envoy_records(path: Path) -> list[RequestTiming]:
    return [r for r in read_records(path).records if r.source == "envoy"] if path.exists() else []


def test_envoy_spreads_records_over_two_collectors_and_a_killed_one_loses_only_its_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    http, grpc = [free_port(), free_port()], [free_port(), free_port()]
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", f"authorization=Bearer%20{TOKEN}")
    spans_to = f"http://127.0.0.1:{grpc[0]}"  # the simulators' spans go to the first collector only
    with ExitStack() as stack:
        (_, first), (second_proc, second) = (
            stack.enter_context(collector(tmp_path / f"collector-{i}", http[i], grpc[i])) for i in (0, 1)
        )
        fast = stack.enter_context(start_simulator(tmp_path, otlp_endpoint=spans_to, otlp_protocol="grpc"))
        slow = stack.enter_context(
            start_simulator(
                tmp_path,
                otlp_endpoint=spans_to,
                otlp_protocol="grpc",
                model="meta-llama/Llama-3.1-70B-Instruct",
            )
        )
        lanes = {"fast": fast, "slow": slow}
        bootstrap = access_log_bootstrap({"fast": fast.port, "slow": slow.port}, http[0], token=TOKEN)
        two_collectors(bootstrap, http)
        envoy = stack.enter_context(start_envoy(tmp_path, bootstrap))

        sent = asyncio.run(send_all(envoy, lanes))
        assert all(s["status"] == 200 and s["done"] for s in sent), sent[:3]
        eventually(
            lambda: len(envoy_records(first)) + len(envoy_records(second)) >= REQUESTS,
            60,
            "a record per request",
        )
        a, b = envoy_records(first), envoy_records(second)
        ids_a, ids_b = {r.request_id for r in a}, {r.request_id for r in b}
        assert not ids_a & ids_b and ids_a | ids_b == {s["id"] for s in sent}  # each record on one collector
        assert min(len(a), len(b)) >= REQUESTS // 10, (len(a), len(b))  # both took a share
        joined_a = sum(r.phases_source == "span" for r in a)
        joined_b = sum(r.phases_source == "span" for r in b)
        print(f"records: {len(a)} and {len(b)}; joined to a span: {joined_a} and {joined_b}")
        assert joined_a >= 0.9 * len(a) and joined_b == 0  # the join needs both halves on one collector

        second_proc.send_signal(signal.SIGKILL)
        second_proc.wait(10)
        before = len(a)
        more = asyncio.run(send_all(envoy, lanes))
        assert all(s["status"] == 200 and s["done"] for s in more)  # the data path never waits on a collector
        # what reaches the survivor settles: Envoy sends its buffer every 0.05 s, the collector writes at once
        counts: list[int] = []

        def settled() -> bool:
            counts.append(len(envoy_records(first)))
            return len(counts) >= 8 and counts[-1] == counts[-8]

        eventually(settled, 60, "the surviving collector's records settle")
        lost = REQUESTS - (counts[-1] - before)
        wanted = "lanewatch_collector.*(ejections_enforced_total|upstream_cx_connect_fail|upstream_rq_503)"
        stats = httpx.get(f"{envoy.admin_url}/stats", params={"filter": wanted}, timeout=5).text
        print(f"after the kill: {REQUESTS - lost} of {REQUESTS} records kept, {lost} lost\n{stats}")
        # One call found it dead (Envoy counts it: a 503 on the collector cluster) and Envoy ejected
        # it: what was lost is that one call's batch, whatever had gathered in the logger's buffer.
        for line in (
            "upstream_cx_connect_fail: 1",
            "upstream_rq_503: 1",
            "outlier_detection.ejections_enforced_total: 1",
        ):
            assert f"cluster.lanewatch_collector.{line}\n" in stats, stats
        assert lost < REQUESTS

        # From then on every record reaches the collector left
        kept = counts[-1]
        again = asyncio.run(send_all(envoy, lanes))
        assert all(s["status"] == 200 and s["done"] for s in again)
        eventually(
            lambda: len(envoy_records(first)) >= kept + REQUESTS, 60, "every record after the ejection"
        )
