"""The gateway's and the simulator's admin APIs under fuzzed requests, against the real processes.

Whatever arrives: no 5xx; without the right bearer token a 401 that changes nothing; a body
the API refuses is a 4xx that changes nothing; a body it takes is exactly what the pure
validator (`parse_degrade`, `parse_faults`) takes, and the state then reads back as sent.
Bodies over the size limit get 413 without being read whole. (The degrade webhook is fuzzed
in tests/unit/collector/degrade/test_server.py.) Neither API declares a body schema in an
OpenAPI document, so the bodies come from hypothesis strategies shaped like the real ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lanewatch.collector.degrade_state.state import parse_degrade
from lanewatch.simulator.faults import FaultError, parse_faults
from tests.servers import SimHandle, closed_port, free_port, start_simulator

from .processes import Service, secret_file, service, write_yaml

pytestmark = pytest.mark.integration

TOKEN = "gw-admin-fuzz-7f3a"
LANES = ["fast", "mid", "slow"]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=16,
)
# What an Authorization header can be: right, wrong, truncated, another scheme, absent.
AUTH = st.sampled_from(
    [None, f"Bearer {TOKEN}", f"Bearer {TOKEN[:-1]}", f"Bearer {TOKEN}0", f"Basic {TOKEN}", "Bearer", ""]
)


def lane_spec() -> st.SearchStrategy[dict[str, Any]]:
    """Per-lane degrades mostly of the right shape, with wrong values and keys mixed in."""
    values = {
        "shift_to": st.sampled_from([*LANES, None, "turbo"]) | json_values,
        "shift_percent": st.integers(-5, 105) | st.floats() | json_values,
        "cap_max_tokens": st.none() | st.integers(-2, 10**6) | json_values,
        "shed_classes": st.lists(st.sampled_from(["batch", "interactive", "Bad!", ""]), max_size=3)
        | json_values,
        "bogus": json_values,
    }
    return st.sets(st.sampled_from(sorted(values)), max_size=4).flatmap(
        lambda keys: st.fixed_dictionaries({k: values[k] for k in keys})
    )


DEGRADE_BODIES = st.one_of(
    st.fixed_dictionaries(
        {"lanes": st.dictionaries(st.sampled_from([*LANES, "turbo"]), lane_spec(), max_size=3)}
    ),
    st.fixed_dictionaries(
        {"lanes": st.dictionaries(st.sampled_from(LANES), lane_spec(), max_size=2)},
        optional={"version": json_values, "lane_order": json_values, "extra": json_values},
    ),
    json_values,
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp = tmp_path_factory.mktemp("gw-fuzz")
    port = free_port()
    dead = f"http://127.0.0.1:{closed_port()}"
    cfg = write_yaml(
        tmp / "gateway.yaml",
        {
            "gateway": {
                "server": {"host": "127.0.0.1", "port": port},
                # Declared models: a shift is only taken to a lane whose models are known.
                "lanes": {lane: {"upstreams": [dead], "models": [f"{lane}-model"]} for lane in LANES},
                "admin_token_file": str(secret_file(tmp, "gw.token", TOKEN)),
            }
        },
    )
    with service(["gateway", "-c", str(cfg)], port, tmp / "gateway.log", "/metrics") as gw:
        yield gw


def _headers(auth: str | None) -> dict[str, str]:
    return {"content-type": "application/json", **({"authorization": auth} if auth is not None else {})}


def test_gateway_admin_under_fuzzed_puts(gateway: Service) -> None:
    good = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=gateway.url, timeout=10) as c:

        @FUZZ
        @given(st.one_of(DEGRADE_BODIES.map(json.dumps), st.text(max_size=40), st.just("[" * 60_000)), AUTH)
        def check(body: str, auth: str | None) -> None:
            before = c.get("/admin/degrade", headers=good).json()
            r = c.put("/admin/degrade", content=body.encode(), headers=_headers(auth))
            assert r.status_code < 500, r.text
            after = c.get("/admin/degrade", headers=good).json()
            if auth != f"Bearer {TOKEN}":
                assert r.status_code == 401 and after == before
                return
            try:
                want = parse_degrade(json.loads(body), LANES)
            except (ValueError, RecursionError):  # DegradeError or not JSON at all
                assert r.status_code == 400 and r.json()["error"]["message"], r.text
                assert after == before
                return
            assert r.status_code == 200, r.text
            assert after == r.json() and set(after["lanes"]) == set(want)
            again = c.put("/admin/degrade", json={"lanes": after["lanes"]}, headers=good)
            assert again.json()["version"] == after["version"]  # what it answers, it takes back as is

        check()
        gateway.alive()


def test_gateway_admin_limits_and_auth_come_before_reading(gateway: Service) -> None:
    good = _headers(f"Bearer {TOKEN}")
    big = b'{"lanes": {}, "extra": "' + b"x" * (64 * 1024) + b'"}'
    with httpx.Client(base_url=gateway.url, timeout=10) as c:
        assert c.put("/admin/degrade", content=big, headers=good).status_code == 413

        def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
            yield from (big[i : i + 4096] for i in range(0, len(big), 4096))

        assert c.put("/admin/degrade", content=chunks(), headers=good).status_code == 413
        shift = {"lanes": {"slow": {"shift_to": "fast", "shift_percent": 50}}}
        body = json.dumps(shift).encode()
        pieces = (body[i : i + 8] for i in range(0, len(body), 8))  # a valid body in many reads
        r = c.put("/admin/degrade", content=pieces, headers=good)
        assert r.status_code == 200 and r.json()["lanes"]["slow"]["shift_percent"] == 50, r.text
        assert c.put("/admin/degrade", json={"lanes": {}}, headers=good).status_code == 200
        assert c.put("/admin/degrade", content=big, headers=_headers("Bearer nope")).status_code == 401
        assert c.get("/admin/degrade", headers=_headers(None)).status_code == 401
        assert c.get("/admin/degrade", headers=good).json()["lanes"] == {}


# ---------------------------------------------------------------- the simulator

FAULT_VALUES = {
    "queue_delay_s": st.floats(-1, 0.01) | json_values,
    "prefill_slowdown": st.floats(-1, 1.2) | json_values,
    "decode_slowdown": st.floats(-1, 1.2) | json_values,
    "stall_s": st.floats(-1, 0.01) | json_values,
    "stall_after_tokens": st.integers(-2, 50) | json_values,
    "stall_rate": st.floats(-0.5, 1.5) | json_values,
    "error_rates": st.dictionaries(st.sampled_from(["429", "500", "503", "404", "x"]), st.floats(-0.5, 1.5))
    | json_values,
    "truncate_after_tokens": st.none() | st.integers(-2, 50) | json_values,
    "truncate_rate": st.floats(-0.5, 1.5) | json_values,
    "malformed_after_tokens": st.none() | st.integers(-2, 50) | json_values,
    "malformed_rate": st.floats(-0.5, 1.5) | json_values,
    "bogus": json_values,
}
# refuse_connections_s is left out: a valid one would stop the sim listening, the fuzzer too.
FAULT_BODIES = st.one_of(
    st.sets(st.sampled_from(sorted(FAULT_VALUES)), max_size=4).flatmap(
        lambda keys: st.fixed_dictionaries({k: FAULT_VALUES[k] for k in keys})
    ),
    json_values.filter(lambda v: not (isinstance(v, dict) and "refuse_connections_s" in v)),
)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimHandle]:
    tmp: Path = tmp_path_factory.mktemp("sim-fuzz")
    with start_simulator(tmp, admin_token_file=secret_file(tmp, "sim.token", TOKEN)) as handle:
        yield handle


def test_simulator_admin_under_fuzzed_posts(sim: SimHandle) -> None:
    good = {"authorization": f"Bearer {TOKEN}"}
    with sim.client(timeout=10) as c:

        @FUZZ
        @given(st.one_of(FAULT_BODIES.map(json.dumps), st.text(max_size=40), st.just("[" * 60_000)), AUTH)
        def check(body: str, auth: str | None) -> None:
            before = c.get("/admin/faults", headers=good).json()
            r = c.post("/admin/faults", content=body.encode(), headers=_headers(auth))
            assert r.status_code < 500, r.text
            after = c.get("/admin/faults", headers=good).json()
            if auth != f"Bearer {TOKEN}":
                assert r.status_code == 401 and after == before
                return
            try:
                want = parse_faults(json.loads(body))
            except (FaultError, ValueError, RecursionError):
                assert r.status_code == 400 and r.json()["error"]["message"], r.text
                assert after == before
                return
            assert r.status_code == 200 and after == r.json(), r.text
            assert after["faults"] == want.model_dump(mode="json")

        try:
            check()
        finally:
            c.delete("/admin/faults", headers=good)
        big = b'{"bogus": "' + b"x" * (64 * 1024) + b'"}'
        assert c.post("/admin/faults", content=big, headers=_headers(f"Bearer {TOKEN}")).status_code == 413
        assert c.get("/health").status_code == 200
    assert sim.process.poll() is None
