"""The LiteLLM handler's degrade state and how it applies to a request body."""

from __future__ import annotations

from typing import Any

from lanewatch.collector.degrade_state.state import DegradeState, Shifter, parse_degrade
from lanewatch.integrations.litellm.degrade import DegradeHolder, plan

ORDER = ("fast", "slow")
GROUPS = {"fast": "fast-group", "slow": "slow-group"}


def state(lanes: dict[str, Any]) -> DegradeState:
    return DegradeState(parse_degrade({"lanes": lanes}, ORDER))


def body(max_tokens: int = 64) -> dict[str, Any]:
    return {"model": "slow-group", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "x"}]}


def test_a_put_replaces_the_state_a_stale_revision_is_refused_and_a_bad_field_named() -> None:
    holder = DegradeHolder(ORDER)
    status, answer = holder.put({"lanes": {"slow": {"shift_to": "fast", "shift_percent": 50}}, "revision": 3})
    assert status == 200 and answer["revision"] == 3 and answer["lane_order"] == ["fast", "slow"]
    assert holder.put({"lanes": {}, "revision": 2})[0] == 409
    assert holder.state.lanes["slow"].shift_percent == 50  # the refused PUT changed nothing
    status, answer = holder.put({"lanes": {"slow": {"shift_to": "nowhere", "shift_percent": 50}}})
    assert status == 400 and "nowhere" in answer["error"]["message"]


def test_a_half_shift_moves_every_other_request_to_the_faster_groups_model() -> None:
    s, shifter = state({"slow": {"shift_to": "fast", "shift_percent": 50}}), Shifter()
    models = []
    for _ in range(4):
        data = body()
        plan(s, data, "slow", "other", GROUPS, shifter, "chat")
        models.append(data["model"])
    assert models == ["slow-group", "fast-group", "slow-group", "fast-group"]


def test_a_cap_clamps_the_bound_vllm_reads_and_a_shed_leaves_the_body() -> None:
    s = state({"slow": {"cap_max_tokens": 8, "shed_classes": ["batch"]}})
    capped = body(64)
    p = plan(s, capped, "slow", "other", GROUPS, Shifter(), "chat")
    assert p.capped and capped["max_tokens"] == 8 and not p.decision.shed
    unbounded = {k: v for k, v in body().items() if k != "max_tokens"}
    plan(s, unbounded, "slow", "other", GROUPS, Shifter(), "chat")
    assert unbounded["max_tokens"] == 8  # no bound is chat's "up to the context": the cap sets one
    shed = body(64)
    p = plan(s, shed, "slow", "batch", GROUPS, Shifter(), "chat")
    assert p.decision.shed and p.decision.actions == ("shed",) and shed == body(64)
