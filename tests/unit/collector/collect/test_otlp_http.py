from __future__ import annotations

import socket

import pytest

from lanewatch.collector.collect.otlp_http import endpoint_url
from lanewatch.collector.common.validation import parse_listen


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("4318", ("127.0.0.1", 4318)),
        ("0", ("127.0.0.1", 0)),
        ("0.0.0.0:4318", ("0.0.0.0", 4318)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:4318", ("::1", 4318)),
    ],
)
def test_parse_listen(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["", "x", "host:", ":4318", "65536", "1.2.3.4:-1", "h:43a"])
def test_parse_listen_refuses_what_is_not_host_port(value: str) -> None:
    with pytest.raises(ValueError, match="HOST:]PORT"):
        parse_listen(value)


def test_endpoint_url() -> None:
    assert endpoint_url("127.0.0.1", 4318) == "http://127.0.0.1:4318/v1/traces"
    assert endpoint_url("::1", 9) == "http://[::1]:9/v1/traces"
    assert endpoint_url("0.0.0.0", 9) == f"http://{socket.gethostname()}:9/v1/traces"
