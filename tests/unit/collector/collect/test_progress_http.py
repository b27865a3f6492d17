"""POST /v1/progress: the fast guard's ingest edge, on a bare app with the handler mounted."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from lanewatch.collector.collect.progress_http import PROGRESS_PATH, progress_endpoint
from lanewatch.collector.progress.inflight import Progress
from lanewatch.collector.progress.wire import encode_progress

JSON = {"content-type": "application/json"}


class Sinks:
    """What the handler handed on."""

    def __init__(self) -> None:
        self.received: list[tuple[str, list[Progress]]] = []
        self.refused: list[int] = []

    def receive(self, reporter: str, events: list[Progress]) -> None:
        self.received.append((reporter, events))

    def refuse(self, count: int) -> None:
        self.refused.append(count)


def client_for(token: str | None = None, max_body_bytes: int = 1 << 20) -> tuple[TestClient, Sinks]:
    sinks = Sinks()
    app = FastAPI()
    handler = progress_endpoint(max_body_bytes, token, sinks.receive, sinks.refuse)
    app.add_api_route(PROGRESS_PATH, handler, methods=["POST"])
    return TestClient(app), sinks


def test_good_report_is_handed_on() -> None:
    client, sinks = client_for()
    events = [Progress(1, "fast", 0.5, False), Progress(2, "fast", 0.1, True)]
    r = client.post(PROGRESS_PATH, content=encode_progress("gw-1", events), headers=JSON)
    assert (r.status_code, r.json()) == (200, {"accepted": 2, "refused": 0})
    assert sinks.received == [("gw-1", events)]
    assert sinks.refused == []


def test_bad_events_are_refused_alone_and_counted() -> None:
    client, sinks = client_for()
    body = b'{"reporter":"gw","events":[[1,"fast",0.5,false],[true,"fast",0.5,false],[2]]}'
    r = client.post(PROGRESS_PATH, content=body, headers=JSON)
    assert (r.status_code, r.json()) == (200, {"accepted": 1, "refused": 2})
    assert sinks.received == [("gw", [Progress(1, "fast", 0.5, False)])]
    assert sinks.refused == [2]


def test_bad_body_is_400_naming_the_field_and_nothing_is_taken() -> None:
    client, sinks = client_for()
    r = client.post(PROGRESS_PATH, content=b'{"reporter":"gw","events":{}}', headers=JSON)
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith("events:")
    assert sinks.received == []
    assert sinks.refused == []


def test_bearer_token_is_required_when_configured() -> None:
    client, sinks = client_for(token="s3cret")
    body = encode_progress("gw", [Progress(1, "fast", 0.5, False)])
    r = client.post(PROGRESS_PATH, content=body, headers=JSON)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    r = client.post(PROGRESS_PATH, content=body, headers={**JSON, "authorization": "Bearer wrong"})
    assert r.status_code == 401
    assert sinks.received == []
    r = client.post(PROGRESS_PATH, content=body, headers={**JSON, "authorization": "Bearer s3cret"})
    assert r.status_code == 200
    assert len(sinks.received) == 1


def test_other_content_type_is_415() -> None:
    client, sinks = client_for()
    body = encode_progress("gw", [])
    r = client.post(PROGRESS_PATH, content=body, headers={"content-type": "text/plain"})
    assert r.status_code == 415
    r = client.post(PROGRESS_PATH, content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 200
    assert sinks.received == [("gw", [])]


def test_body_over_the_limit_is_413() -> None:
    client, sinks = client_for(max_body_bytes=64)
    body = encode_progress("gw", [Progress(i, "fast", 0.5, False) for i in range(20)])
    assert len(body) > 64
    r = client.post(PROGRESS_PATH, content=body, headers=JSON)
    assert r.status_code == 413
    assert sinks.received == []
