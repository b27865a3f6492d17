"""The simulator's API key (as `vllm serve --api-key`) and its admin API's token and size limit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from lanewatch.simulator.app import MAX_ADMIN_BODY, SimConfig, Simulator, create_app
from lanewatch.simulator.profiles import PROFILES

KEY, TOKEN = "sk-sim-5ec2e7", "admin-70ken"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest.fixture
def client() -> Iterator[TestClient]:
    sim = Simulator(SimConfig(PROFILES["fast"], "m", admin_token=TOKEN, api_key=KEY))
    with TestClient(create_app(sim)) as c:
        yield c


@pytest.mark.parametrize(
    "auth", [None, "Bearer wrong", f"Basic {KEY}", f"Bearer {KEY}x", f"Bearer {KEY[:-1]}", "Bearer"]
)
def test_v1_needs_the_key(client: TestClient, auth: str | None) -> None:
    headers = {"authorization": auth} if auth is not None else {}
    for r in (client.get("/v1/models", headers=headers), client.post("/v1/chat/completions", json=CHAT)):
        assert (r.status_code, r.json()) == (401, {"error": "Unauthorized"})
        assert r.headers["x-request-id"]


def test_the_key_opens_v1_and_the_rest_stays_open(client: TestClient) -> None:
    for scheme in ("Bearer", "bearer"):
        r = client.post("/v1/chat/completions", json=CHAT, headers={"authorization": f"{scheme} {KEY}"})
        assert r.status_code == 200, r.text
    for path in ("/health", "/metrics", "/version", "/load"):
        assert client.get(path).status_code == 200, path


def test_admin_takes_its_token_not_the_key_and_refuses_big_bodies(client: TestClient) -> None:
    admin = {"authorization": f"Bearer {TOKEN}"}
    assert client.get("/admin/faults", headers={"authorization": f"Bearer {KEY}"}).status_code == 401
    before = client.get("/admin/faults", headers=admin).json()
    big = b'{"queue_delay_s": 0' + b" " * MAX_ADMIN_BODY + b"}"
    r = client.post("/admin/faults", content=big, headers=admin)
    assert r.status_code == 413 and r.json()["error"]["code"] == 413
    deep = b"[" * (MAX_ADMIN_BODY - 1)
    assert client.post("/admin/faults", content=deep, headers=admin).status_code == 400
    assert client.get("/admin/faults", headers=admin).json() == before


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER", "bEaReR"])
def test_the_admin_token_takes_bearer_in_any_case(client: TestClient, scheme: str) -> None:
    assert client.get("/admin/faults", headers={"authorization": f"{scheme} {TOKEN}"}).status_code == 200
    assert client.get("/admin/faults", headers={"authorization": f"{scheme} {TOKEN}x"}).status_code == 401
    assert client.get("/admin/faults", headers={"authorization": f"Basic {TOKEN}"}).status_code == 401


HEADERS = [
    None, "", "Bearer", "Bearer ", f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}",
    f"Bearer  {TOKEN}", f"Bearer {TOKEN} ", f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer{TOKEN}",
    f"Token {TOKEN}", TOKEN,
]  # fmt: skip


@pytest.mark.parametrize("header", HEADERS)
def test_the_simulator_and_the_shared_lanewatch_check_agree(header: str | None) -> None:
    # The simulator imports nothing of lanewatch (its contract is vLLM's), so it keeps its own
    # check; it must accept exactly what every lanewatch service's bearer check accepts.
    import hashlib

    from lanewatch.collector.common.secrets import bearer_ok
    from lanewatch.simulator.app import bearer_matches

    digest = hashlib.sha256(TOKEN.encode()).digest()
    assert bearer_matches((header or "").encode(), digest) == bearer_ok(header, TOKEN)
