"""`lanewatch demo --router litellm` as a user runs it, a real process with a real LiteLLM proxy
(`make litellm`'s venv), Prometheus and Alertmanager on 127.0.0.1: the fault pages, the
controller's litellm adapter puts the shift into lanewatch's handler in the proxy, whose pre-call
hook sends the slow lane's model group to the fast lane's, and the restore moves it back. The
records come from the handler (source `litellm`, lane = the model group LiteLLM routed to), so they
show where LiteLLM sent each request. The run takes about two and a half minutes here.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lanewatch.collector.demo.configs import MODELS
from tests.conftest import require_binary
from tests.e2e.router_demo import run_router_demo
from tests.litellm import litellm_python

# serial: beside two other test workers on two cores, the LiteLLM proxy (Python, CPU-bound per chunk)
# stalled long enough to put the fast lane past its 0.5 s TTFT SLO, and the guard degraded it
pytestmark = [pytest.mark.e2e, pytest.mark.serial, pytest.mark.timeout(480)]
FIRED_WITHIN_S = 6.0  # the fault to the guard's alert


def test_demo_through_litellm_tells_the_whole_story_and_the_handler_moves_the_traffic(tmp_path: Path) -> None:
    for name in ("prometheus", "prometheus-alertmanager"):
        require_binary(name)
    litellm_python()
    demo = run_router_demo("litellm", tmp_path / "out")
    summary, records = demo.summary, demo.records
    assert {r["source"] for r in records} == {"probe", "litellm"}  # no gateway in the path
    litellm = [r for r in records if r["source"] == "litellm"]
    # Each request the traffic sent is one record from the handler, none twice (the demo waits for
    # the handler's last batch before it stops the proxy).
    traffic = summary["traffic"]
    assert traffic["errors"] == {} and traffic["skipped"] == 0, traffic
    assert len(litellm) == traffic["sent"], (len(litellm), traffic["sent"])
    ids = Counter(r["request_id"] for r in litellm)
    assert len(ids) == len(litellm), ids.most_common(3)
    ok = [r for r in litellm if r["status"] == 200]
    assert len(ok) == len(litellm), Counter((r["status"], r["error"]) for r in litellm)
    assert all(r["ttft_s"] is not None and 0 < r["ttft_s"] <= r["e2e_s"] for r in ok)
    # The model group LiteLLM sent each request to is its lane's, and its deployment the lane.
    assert all(r["model"] == MODELS[r["lane"]] and r["attrs"]["deployment"] == r["lane"] for r in ok)

    before, during, after = demo.slow_routed(ok)
    assert before and during and after, (len(before), len(during), len(after))
    # The handler's shift: the slow lane's requests went to the fast lane's model group, and back.
    assert all(r["lane"] == "fast" for r in during), [r["lane"] for r in during]
    assert all(r["lane"] == "slow" for r in before + after), [r["lane"] for r in before + after]
    lanes = summary["lanes"]
    assert lanes["fast"]["by_source"].get("litellm") and lanes["slow"]["by_source"].get("litellm")
    # The handler reports each streamed request while it waits, so the guard judges a request past
    # its SLO as it passes it, not when it ends: it fires within seconds, as through the gateway
    # (3.1 s here; 7.6-9.8 s when it judged the handler's finished records).
    loop = summary["loop"]
    assert loop["fired_by"] == "guard" and loop["fault_to_alert_s"] <= FIRED_WITHIN_S, loop
