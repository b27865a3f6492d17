from __future__ import annotations

import dataclasses
import json

import pytest

from lanewatch.collector.record.timing import (
    CONTENT_FIELDS,
    SERVER_WAIT,
    ErrorKind,
    RequestTiming,
    breakdown,
    error_kind_for_status,
)


def _record(**kw: object) -> RequestTiming:
    base: dict[str, object] = dict(
        source="probe", target="sim-fast", lane="fast", request_class="short", model="m",
        dns_s=0.001, connect_s=0.002, tls_s=0.003, send_s=0.0005,
        ttfb_s=0.01, ttft_s=0.1, e2e_s=0.5, output_tokens=5,
    )  # fmt: skip
    base.update(kw)
    return RequestTiming(**base)  # type: ignore[arg-type]


def test_tpot_follows_vllm_definition() -> None:
    r = _record(ttft_s=0.1, e2e_s=0.5, output_tokens=5)
    assert r.tpot_s == pytest.approx(0.1)


@pytest.mark.parametrize("tokens", [None, 0, 1])
def test_tpot_undefined_below_two_tokens(tokens: int | None) -> None:
    assert _record(output_tokens=tokens).tpot_s is None


def test_breakdown_without_server_span_collapses_server_wait() -> None:
    parts = breakdown(_record())
    assert list(parts) == ["dns", "connect", "tls", "send", SERVER_WAIT, "decode"]
    assert sum(parts.values()) == pytest.approx(0.5)
    assert parts[SERVER_WAIT] == pytest.approx(0.1 - 0.0065)


def test_breakdown_with_server_span_is_exhaustive() -> None:
    r = _record().with_server_phases(queue_s=0.02, prefill_s=0.05, decode_s=0.39)
    parts = breakdown(r)
    assert list(parts) == ["dns", "connect", "tls", "send", "queue", "prefill", "residual", "decode"]
    assert sum(parts.values()) == pytest.approx(0.5)
    assert parts["residual"] == pytest.approx(0.1 - 0.0065 - 0.07)


def test_breakdown_clamps_server_phases_that_overrun_the_client_window() -> None:
    r = _record().with_server_phases(queue_s=0.2, prefill_s=0.2, decode_s=0.1)
    parts = breakdown(r)
    assert all(v >= 0 for v in parts.values())
    assert sum(parts.values()) == pytest.approx(0.5)
    assert parts["prefill"] == 0.0 and parts["residual"] == 0.0


def test_breakdown_empty_for_failed_request() -> None:
    assert breakdown(_record(ttft_s=None, e2e_s=None, error=ErrorKind.TTFT_TIMEOUT)) == {}


def test_json_round_trip() -> None:
    r = _record(error=ErrorKind.STALL, itl_s=(0.01, 0.02), attrs={"served_lane": "fast"})
    line = json.dumps(r.to_json())
    back = RequestTiming.from_json(json.loads(line))
    assert back == r
    assert json.loads(line)["error"] == "stall"
    assert json.loads(line)["tpot_s"] == pytest.approx(r.tpot_s)
    out = r.to_json()
    assert type(out["error"]) is str and type(out["itl_s"]) is list and type(out["attrs"]) is dict
    unset = (*CONTENT_FIELDS, "itl_stats")  # left out while unset
    fields = [f.name for f in dataclasses.fields(RequestTiming) if f.name not in unset]
    assert list(out) == [*fields, "tpot_s"]  # every field, in declaration order


@pytest.mark.parametrize(
    ("status", "kind"),
    [(200, None), (204, None), (400, ErrorKind.HTTP_4XX), (404, ErrorKind.HTTP_4XX),
     (429, ErrorKind.HTTP_429), (500, ErrorKind.HTTP_5XX), (503, ErrorKind.HTTP_5XX)],
)  # fmt: skip
def test_error_kind_for_status(status: int, kind: ErrorKind | None) -> None:
    assert error_kind_for_status(status) is kind


def test_content_fields_round_trip_and_stay_out_of_json_while_unset() -> None:
    plain = _record()
    assert not {"prompt_text", "response_text"} & set(plain.to_json())
    r = _record(prompt_text="Say «hi»\nplease", response_text="")
    line = json.dumps(r.to_json())
    assert json.loads(line)["prompt_text"] == "Say «hi»\nplease"
    assert json.loads(line)["response_text"] == ""  # empty text is text: kept
    back = RequestTiming.from_json(json.loads(line))
    assert back == r and back.response_text == ""
    assert RequestTiming.from_json(plain.to_json()).prompt_text is None


def test_without_content_and_repr_keep_text_out() -> None:
    r = _record(prompt_text="PROMPT-CANARY", response_text="RESPONSE-CANARY")
    assert "CANARY" not in repr(r)
    stripped = r.without_content()
    assert (stripped.prompt_text, stripped.response_text) == (None, None)
    assert stripped == _record()
    plain = _record()
    assert plain.without_content() is plain
