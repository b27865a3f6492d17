"""POST /v1/records on the collector's app: batches join, window, metrics and file as probe records do."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lanewatch.collector.collect.credentials import IngestAuth
from lanewatch.collector.collect.records_http import RECORDS_PATH
from lanewatch.collector.record.batch import encode_batch, encode_record
from lanewatch.collector.record.evidence import ServerSpan
from lanewatch.collector.record.timing import RequestTiming
from lanewatch.exporters import names
from tests.unit.collector.record.test_batch import tap

from .test_service import Clock, config, service, text
from .test_span_ingest import sample

JSON = {"content-type": "application/json"}


def batch(*records: RequestTiming) -> bytes:
    return encode_batch(encode_record(r) for r in records)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def client_for(tmp_path: Path, clock: Clock, **overrides: Any) -> tuple[TestClient, Any, list[RequestTiming]]:
    svc, seen = service(config(tmp_path, **overrides), clock)
    return TestClient(svc.app()), svc, seen


@pytest.fixture
def running(tmp_path: Path, clock: Clock) -> Iterator[tuple[TestClient, Any, list[RequestTiming]]]:
    client, svc, seen = client_for(tmp_path, clock)
    with client:
        yield client, svc, seen


def test_posted_records_wait_for_their_span_then_reach_metrics_and_file(
    running: tuple[TestClient, Any, list[RequestTiming]], tmp_path: Path, clock: Clock
) -> None:
    client, svc, seen = running
    r = client.post(RECORDS_PATH, content=batch(tap(1), tap(2, status=500, trace_id=None)), headers=JSON)
    answer = {"accepted": 2, "refused": [], "refused_count": 0, "duplicates": 0}
    assert (r.status_code, r.json()) == (200, answer)
    assert [x.request_id for x in seen] == ["r2"]  # no span can come for a 500: it passes at once
    span = ServerSpan(trace_id=f"{1:032x}", request_id="r1", queue_s=0.1, prefill_s=0.05, decode_s=0.2)
    svc.receive_spans([span])
    joined = seen[-1]
    assert (joined.request_id, joined.source, joined.queue_s, joined.decode_s) == ("r1", "tap", 0.1, 0.2)
    labels = 'lane="fast",model="m",request_class="interactive",source="tap",target="127.0.0.1:8001"'
    assert f"{names.REQUESTS_TOTAL}{{{labels}}} 2.0" in text(svc)
    queue = labels.replace('model="m",', 'model="m",phase="queue",')
    assert f"{names.PHASE_SECONDS}_count{{{queue}}} 1.0" in text(svc)  # the breakdown has server phases
    svc.shutdown()
    lines = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert [(x["request_id"], x["queue_s"]) for x in lines] == [("r2", None), ("r1", 0.1)]


def test_a_bad_record_is_refused_alone_naming_index_and_field(
    running: tuple[TestClient, Any, list[RequestTiming]],
) -> None:
    client, svc, seen = running
    records = [tap(i, status=500, trace_id=None).to_json() for i in range(4)]
    records[2]["output_tokens"] = "many"
    raw = json.dumps({"records": records}).replace('"e2e_s": 0.3', '"e2e_s": NaN', 1)
    r = client.post(RECORDS_PATH, content=raw, headers=JSON)
    assert r.status_code == 200
    answer = r.json()
    assert answer["accepted"] == 2 and answer["refused_count"] == 2
    assert [(x["index"], x["field"]) for x in answer["refused"]] == [(0, "e2e_s"), (2, "output_tokens")]
    assert [x.request_id for x in seen] == ["r1", "r3"]  # the others are kept
    assert "NaN" not in text(svc)


def test_absurd_records_are_refused_alone_and_counted_on_metrics(
    running: tuple[TestClient, Any, list[RequestTiming]],
) -> None:
    client, svc, seen = running
    now = time.time()
    records = [
        tap(0, status=500, trace_id=None),
        tap(1, status=500, trace_id=None, e2e_s=1e297),  # would poison the e2e histogram's _sum
        tap(2, status=500, trace_id=None, ttft_s=5000.0, e2e_s=0.001),
        tap(3, status=500, trace_id=None, started_at=16_725_225_600.0),  # the year 2500
        tap(4, status=500, trace_id=None, started_at=now - 3 * 86_400),  # three days before it came
        tap(5, status=500, trace_id=None),
    ]
    r = client.post(RECORDS_PATH, content=batch(*records), headers=JSON)
    assert r.status_code == 200 and r.json()["accepted"] == 2 and r.json()["refused_count"] == 4
    fields = [(x["index"], x["field"]) for x in r.json()["refused"]]
    assert fields == [(1, "e2e_s"), (2, "ttft_s"), (3, "started_at"), (4, "started_at")]
    assert [x.request_id for x in seen] == ["r0", "r5"]
    assert sample(svc, names.INGEST_RECORDS_REFUSED_TOTAL) == 4
    assert "e+29" not in text(svc)  # no sum of 1e297 on any histogram
    client.post(RECORDS_PATH, content=batch(tap(6, e2e_s=99_999.0)), headers=JSON)
    assert sample(svc, names.INGEST_RECORDS_REFUSED_TOTAL) == 5


def test_a_body_that_is_no_batch_is_refused_whole(
    running: tuple[TestClient, Any, list[RequestTiming]],
) -> None:
    client, svc, seen = running
    r = client.post(RECORDS_PATH, content=b'{"records": {"0": {}}}', headers=JSON)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["field"] == "records" and error["message"].startswith("batch.records: ")
    assert seen == [] and svc.joiner.pending == (0, 0)  # nothing of it ingested
    assert names.REQUESTS_TOTAL + "{" not in text(svc)


def test_wrong_type_too_large_and_empty_bodies(tmp_path: Path, clock: Clock) -> None:
    client, _svc, seen = client_for(tmp_path, clock, ingest={"max_body_bytes": 2048})
    with client:
        assert (
            client.post(
                RECORDS_PATH, content=batch(tap(0)), headers={"content-type": "text/plain"}
            ).status_code
            == 415
        )
        big = batch(*(tap(i) for i in range(10)))
        assert len(big) > 2048
        r = client.post(RECORDS_PATH, content=big, headers=JSON)
        assert r.status_code == 413 and "2048" in r.json()["error"]["message"]
        assert client.post(RECORDS_PATH, content=b"", headers=JSON).status_code == 400
    assert seen == []


def test_a_configured_token_is_required(tmp_path: Path, clock: Clock) -> None:
    token = tmp_path / "ingest.token"
    token.write_text("s3cret-token\n")
    client, svc, seen = client_for(tmp_path, clock, ingest={"token_file": str(token)})
    with client:
        assert client.post(RECORDS_PATH, content=batch(tap(0)), headers=JSON).status_code == 401
        wrong = {**JSON, "authorization": "Bearer nope"}
        r = client.post(RECORDS_PATH, content=batch(tap(0)), headers=wrong)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        good = {**JSON, "authorization": "Bearer s3cret-token"}
        assert client.post(RECORDS_PATH, content=batch(tap(0)), headers=good).status_code == 200
    assert seen == [] and svc.joiner.pending == (1, 0)  # only the third one got in (it waits for its span)


def test_ingest_can_be_turned_off(tmp_path: Path, clock: Clock) -> None:
    client, _svc, _seen = client_for(tmp_path, clock, ingest={"enabled": False})
    with client:
        assert client.post(RECORDS_PATH, content=batch(tap(0)), headers=JSON).status_code == 404


def authorized(header: str | None, token: str | None) -> bool:
    """Whether the ingest's credentials (one shared token, or none: open) take this header."""
    return IngestAuth(token).identify(header) is not None


def test_authorized() -> None:
    assert authorized(None, None) and authorized("whatever", None)
    assert authorized("Bearer t0k", "t0k") and authorized("bearer  t0k ", "t0k")
    assert not authorized("Bearer t0", "t0k") and not authorized("t0k", "t0k") and not authorized(None, "t0k")
