"""The admit stage on its own: a request's body and head in, the admitted request or the answer out."""

from __future__ import annotations

import json
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from lanewatch.collector.degrade_state.state import LaneDegrade
from lanewatch.collector.gateway import Gateway
from lanewatch.collector.gateway.admission.admit import Admission, admit
from lanewatch.collector.gateway.front.connection import Request, Response
from lanewatch.collector.gateway.settings import GatewayConfig

USAGE_ASK = b',"stream_options":{"include_usage":true}}'


def _gateway() -> Gateway:
    lanes = {"fast": {"upstreams": ["http://127.0.0.1:9"]}, "slow": {"upstreams": ["http://127.0.0.1:10"]}}
    return Gateway(GatewayConfig.model_validate({"lanes": lanes}))


def _request(body: bytes | dict[str, Any]) -> Request:
    raw = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
    headers = CIMultiDictProxy(CIMultiDict({"content-type": "application/json"}))
    return Request("POST", "/v1/chat/completions", "/v1/chat/completions", (1, 1), headers, raw)


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 100, **extra}


def test_a_body_that_is_no_json_object_is_answered_400() -> None:
    gw = _gateway()
    for raw in (b"{not json", b"[1, 2]"):
        answer = admit(gw, _request(raw), "chat", None)
        assert isinstance(answer, Response) and answer.status == 400, raw


def test_a_streamed_request_goes_to_the_default_lane_asking_for_usage_itself() -> None:
    gw = _gateway()
    request = _request(_chat(stream=True))
    admitted = admit(gw, request, "chat", "127.0.0.1")
    assert isinstance(admitted, Admission)
    assert admitted.decision.served_lane == gw.routes.default_lane == "slow"
    assert admitted.actions == () and admitted.strip_usage
    assert admitted.body == request.body[:-1] + USAGE_ASK  # appended, not re-encoded
    assert admitted.request_class == gw.cfg.default_class and admitted.model == "m"
    assert gw.stats.requests[("slow", "slow", "none")] == 1


def test_a_request_that_asked_for_usage_keeps_its_bytes() -> None:
    request = _request(_chat(stream=True, stream_options={"include_usage": True}))
    admitted = admit(_gateway(), request, "chat", None)
    assert isinstance(admitted, Admission)
    assert admitted.body == request.body and not admitted.strip_usage


def test_the_degrade_state_caps_or_sheds_the_request() -> None:
    gw = _gateway()
    gw.set_degrade({"slow": LaneDegrade(cap_max_tokens=8)})
    capped = admit(gw, _request(_chat()), "chat", None)
    assert isinstance(capped, Admission)
    assert capped.actions == ("cap_max_tokens",) and json.loads(capped.body)["max_tokens"] == 8

    gw.set_degrade({"slow": LaneDegrade(shed_classes=(gw.cfg.default_class,))})
    shed = admit(gw, _request(_chat()), "chat", None)
    assert isinstance(shed, Response) and shed.status == 429
    assert shed.headers["x-lanewatch-lane"] == "slow" and "Retry-After" in shed.headers
    assert gw.stats.shed[("slow", gw.cfg.default_class)] == 1
