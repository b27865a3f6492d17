from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lanewatch.collector.degrade.server import Front, create_app
from lanewatch.exporters import names
from tests.alertmanager_bodies import fixture

from .conftest import Controller

TOKEN = "am-token-7b3e9c"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
LIMIT = 4096


@pytest.fixture
def client(controller: Controller) -> Iterator[TestClient]:
    app = create_app(Front(controller.service), controller.metrics, TOKEN, LIMIT)
    with TestClient(app) as c:
        yield c


def footprint(c: Controller) -> tuple[int, int, object]:
    """Everything a post could change: revision, audit length, state."""
    return c.store.load().revision, c.store.audit_count(), c.service.state


def post(client: TestClient, data: Any, headers: dict[str, str] = AUTH) -> Any:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return client.post("/alertmanager", content=raw, headers=headers)


def test_valid_post_changes_state_and_a_replay_does_not(client: TestClient, controller: Controller) -> None:
    r = post(client, fixture("firing"))
    assert r.status_code == 200 and r.json()["outcomes"] == {"fired": 1}
    after = footprint(controller)
    assert after[0] == 1
    r = post(client, fixture("firing"))
    assert r.status_code == 200 and r.json()["outcomes"] == {"duplicate": 1}
    assert footprint(controller) == after
    assert controller.sample(names.DEGRADE_NOTIFICATIONS_TOTAL, outcome="applied") == 1.0
    assert controller.sample(names.DEGRADE_NOTIFICATIONS_TOTAL, outcome="unchanged") == 1.0


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/json"},
        {"Authorization": "Bearer wrong", "Content-Type": "application/json"},
        {"Authorization": f"Bearer {TOKEN}x", "Content-Type": "application/json"},
        {"Authorization": TOKEN, "Content-Type": "application/json"},
        {"Authorization": f"Basic {TOKEN}", "Content-Type": "application/json"},
    ],
)
def test_unauthenticated_posts_change_nothing(
    client: TestClient, controller: Controller, headers: dict[str, str]
) -> None:
    before = footprint(controller)
    r = post(client, fixture("firing"), headers)
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert footprint(controller) == before
    assert controller.sample(names.DEGRADE_NOTIFICATIONS_TOTAL, outcome="unauthorized") == 1.0


def test_oversized_posts_change_nothing(client: TestClient, controller: Controller) -> None:
    before = footprint(controller)
    big = fixture("firing")
    big["commonAnnotations"] = {"pad": "x" * LIMIT}
    assert post(client, big).status_code == 413  # declared by Content-Length

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        data = json.dumps(big).encode()
        for i in range(0, len(data), 512):
            yield data[i : i + 512]

    r = client.post("/alertmanager", content=chunks(), headers=AUTH)
    assert r.status_code == 413 and "4096" in r.json()["error"]
    assert footprint(controller) == before


def test_wrong_content_type_is_refused(client: TestClient, controller: Controller) -> None:
    before = footprint(controller)
    r = post(client, fixture("firing"), {**AUTH, "Content-Type": "text/plain"})
    assert r.status_code == 415 and footprint(controller) == before


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "json"),
        (b"[]", "(body)"),
        (json.dumps({**fixture("firing"), "version": "3"}).encode(), "version"),
        (json.dumps({**fixture("firing"), "alerts": [{"status": "firing"}]}).encode(), "alerts.0.labels"),
    ],
)
def test_malformed_posts_get_400_with_a_reason(
    client: TestClient, controller: Controller, raw: bytes, reason: str
) -> None:
    before = footprint(controller)
    r = post(client, raw)
    assert r.status_code == 400
    assert any(reason in line.lower() for line in r.json()["reasons"]), r.json()
    assert footprint(controller) == before


def test_healthz_and_metrics(client: TestClient, controller: Controller) -> None:
    post(client, fixture("firing"))
    h = client.get("/healthz")
    assert h.status_code == 200 and h.json()["revision"] == 1
    m = client.get("/metrics")
    assert m.status_code == 200
    assert f'{names.DEGRADE_ACTIVE}{{action="shift",lane="slow"}} 1.0' in m.text
    assert f'{names.DEGRADE_TRANSITIONS_TOTAL}{{action="shift",direction="apply",lane="slow"}} 1.0' in m.text
    assert TOKEN not in m.text and TOKEN not in h.text


def test_insecure_dev_accepts_posts_without_a_token(controller: Controller) -> None:
    with TestClient(create_app(Front(controller.service), controller.metrics, None, LIMIT)) as c:
        r = post(c, fixture("firing"), {"Content-Type": "application/json"})
    assert r.status_code == 200


# ---- fuzzing: whatever arrives, a refused post changes nothing and nothing is a 5xx

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


def _mutations() -> st.SearchStrategy[Any]:
    """The captured body with one field replaced, removed, or added at some depth."""

    def mutate(args: tuple[str, list[str], Any, str]) -> Any:
        status, path, value, how = args
        data = fixture(status)
        target: Any = data
        for key in path[:-1]:
            target = target[key] if not isinstance(target, list) else target[0]
        leaf = path[-1]
        if how == "drop" and isinstance(target, dict):
            target.pop(leaf, None)
        elif isinstance(target, dict):
            target[leaf] = value
        return data

    paths = st.sampled_from(
        [["version"], ["status"], ["alerts"], ["groupKey"], ["truncatedAlerts"], ["receiver"],
         ["groupLabels"],
         ["alerts", "0", "status"], ["alerts", "0", "labels"], ["alerts", "0", "startsAt"],
         ["alerts", "0", "endsAt"], ["alerts", "0", "fingerprint"], ["alerts", "0", "labels", "lane"],
         ["alerts", "0", "annotations"], ["extra"], ["alerts", "0", "extra"]]
    )  # fmt: skip
    return st.tuples(
        st.sampled_from(["firing", "resolved"]), paths, json_values, st.sampled_from(["drop", "set"])
    ).map(mutate)


def test_fuzzed_posts_never_fail_open(controller: Controller) -> None:
    app = create_app(Front(controller.service), controller.metrics, TOKEN, LIMIT)
    with TestClient(app) as client:

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.one_of(json_values, _mutations(), st.binary(max_size=64)))
        def check(payload: Any) -> None:
            before = footprint(controller)
            r = post(client, payload)
            assert r.status_code < 500, r.text
            if r.status_code != 200:
                assert 400 <= r.status_code < 500 and r.json()["error"]
                assert footprint(controller) == before
            # the same payload again never acts a second time
            again = footprint(controller)
            r2 = post(client, payload)
            assert r2.status_code == r.status_code and footprint(controller) == again

        check()
