"""gateway.workers: the count, each worker's records file and series budget, the degrade state a worker
holds, and the channel to the supervisor."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
from pydantic import ValidationError

from lanewatch.collector.collect.settings import ExportConfig
from lanewatch.collector.degrade_state.state import DegradeState, LaneDegrade
from lanewatch.collector.gateway import Gateway
from lanewatch.collector.gateway.processes.control_channel import Link, LinkClosed, Message
from lanewatch.collector.gateway.processes.per_worker import (
    SharedDegrade,
    export_share,
    records_path,
    state_to_wire,
    worker_count,
)
from lanewatch.collector.gateway.settings import GatewayConfig

LANES = {"fast": {"upstreams": ["http://127.0.0.1:9"]}, "slow": {"upstreams": ["http://127.0.0.1:9"]}}


def test_workers_is_a_count_or_auto_for_the_cores_it_may_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert worker_count(GatewayConfig()) == 1
    assert worker_count(GatewayConfig(workers="4")) == 4  # as an env override or flag gives it
    monkeypatch.setattr("os.sched_getaffinity", lambda _pid: {0, 2, 5})
    assert worker_count(GatewayConfig(workers="auto")) == 3


@pytest.mark.parametrize("bad", [0, -1, 257, "many", "2.5", True, 1.5])
def test_a_bad_workers_value_is_one_message(bad: object) -> None:
    with pytest.raises(ValidationError) as caught:
        GatewayConfig(workers=bad)
    (error,) = caught.value.errors()
    assert error["loc"] == ("workers",) and "from 1 to 256, or 'auto'" in error["msg"]


def test_each_worker_has_its_own_records_file_and_a_share_of_the_series_budget() -> None:
    assert records_path(Path("/r/tap.jsonl"), 1, 1) == Path("/r/tap.jsonl")  # one process: as given
    assert records_path(Path("/r/tap.jsonl"), 2, 3) == Path("/r/tap.worker2.jsonl")
    assert records_path(None, 2, 3) is None
    export = ExportConfig(max_series=10_000, max_series_per_family=4_000)
    assert export_share(export, 1) is export
    share = export_share(export, 3)
    assert (share.max_series, share.max_series_per_family) == (3_333, 1_333)  # 3 x share <= the budget


def test_a_worker_takes_the_latest_state_it_was_sent_and_never_an_older_one() -> None:
    shared = SharedDegrade()
    shift = DegradeState({"slow": LaneDegrade(shift_to="fast", shift_percent=50)}, version=2, revision=9)
    shared.take(state_to_wire(shift, seq=3))
    gw = Gateway(GatewayConfig.model_validate({"lanes": LANES}))
    shared.attach(gw)  # built after the state came: applied on attaching
    assert (gw.degrade, gw.stats.degrade_version) == (shift, 2)
    shared.take(state_to_wire(DegradeState(), seq=2))  # sent before seq 3, read after it
    assert gw.degrade == shift
    shared.take(state_to_wire(DegradeState(version=3), seq=4))
    assert (gw.degrade, gw.stats.degrade_version) == (DegradeState(version=3), 3)


async def _pair() -> tuple[Link, Link, list[Message]]:
    a, b = socket.socketpair()
    seen: list[Message] = []

    async def echo(message: Message) -> Message:
        seen.append(message)
        if message.get("op") == "slow":
            await asyncio.sleep(10)
        return {"back": message.get("n"), "text": "x" * int(message.get("size", 0))}

    return await Link.over(a, echo), await Link.over(b, echo), seen


async def test_both_ends_ask_and_answer_in_any_order() -> None:
    left, right, seen = await _pair()
    slow = asyncio.create_task(left.ask({"op": "slow"}, 0.2))
    answers = await asyncio.gather(left.ask({"n": 1}, 5), right.ask({"n": 2, "size": 3_000_000}, 5))
    assert [a["back"] for a in answers] == [1, 2] and len(answers[1]["text"]) == 3_000_000
    with pytest.raises(LinkClosed, match=r"no answer to 'slow' within 0\.2 s"):
        await slow
    assert {m.get("n") for m in seen} == {None, 1, 2}
    right.close()
    await asyncio.wait_for(left.closed.wait(), 5)
    with pytest.raises(LinkClosed):
        await left.ask({"n": 3}, 5)


async def test_a_question_waiting_when_the_other_side_goes_fails_at_once() -> None:
    left, right, _ = await _pair()
    waiting = asyncio.create_task(left.ask({"op": "slow"}, 30))
    await asyncio.sleep(0.05)
    right.close()
    with pytest.raises(LinkClosed, match="gone"):
        await asyncio.wait_for(waiting, 5)


def test_settings_reach_a_worker_unchanged() -> None:
    """The supervisor sends its settings as JSON; the worker builds the same gateway from them."""
    rich = {
        "lanes": {**LANES, "fast": {"upstreams": ["https://a:1"], "models": ["m1"], "cacert": "/ca.pem"}},
        "rules": {"models": {"m1": "fast"}, "message_regex": [{"pattern": "(?i)sum", "lane": "slow"}]},
        "admin_token_file": "/t",
        "collector_url": "http://c:9464/v1/records",
        "workers": "auto",
        "shift_mode": "random",
        "drain_timeout_s": 2.5,
    }
    cfg = GatewayConfig.model_validate(rich)
    assert GatewayConfig.model_validate(cfg.model_dump(mode="json")) == cfg
    export = ExportConfig(max_series=500, record_content=True)
    assert ExportConfig.model_validate(export.model_dump(mode="json")) == export
