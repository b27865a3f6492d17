"""The Prometheus edge: the queries asked, their answers as evidence, and missing families as unknowns."""

from __future__ import annotations

import json

import httpx
import pytest

from lanewatch.collector.diagnose import SloTargets, Window, diagnose, top_findings
from lanewatch.collector.diagnose.gather import DiagnoseInputError, Sources, gather
from lanewatch.collector.diagnose.queries import LaneQueries
from lanewatch.exporters import names

Answer = list[tuple[dict[str, str], float]]


def _vector(samples: Answer) -> dict[str, object]:
    result = [{"metric": m, "value": [1.0, str(v)]} for m, v in samples]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def _prometheus(answers: dict[str, Answer]) -> tuple[httpx.MockTransport, list[str]]:
    """Answers each query whose text contains a key (first match, in insertion order); else empty."""
    asked: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        asked.append(query)
        for key, samples in answers.items():
            if key in query:
                return httpx.Response(200, json=_vector(samples))
        return httpx.Response(200, json=_vector([]))

    return httpx.MockTransport(handle), asked


def _queue_bound(kv: float) -> dict[str, Answer]:
    """A slow lane whose TTFT is 2.5 s, 2.4 s of it queue; vLLM's waiting 6 and KV usage `kv`."""
    return {
        f"increase({names.REQUESTS_TOTAL}": [({}, 600)],
        f"increase({names.REQUEST_ERRORS_TOTAL}": [],
        f"histogram_quantile(0.99, sum by (le) (rate({names.TTFT_SECONDS}": [({}, 3.0)],
        f"histogram_quantile(0.5, sum by (le) (rate({names.TTFT_SECONDS}": [({}, 2.4)],
        f"rate({names.TTFT_SECONDS}_sum": [({}, 2.5)],
        f"rate({names.E2E_SECONDS}_sum": [({}, 6.0)],
        f"{names.PHASE_SECONDS}_sum": [({"phase": "queue"}, 24.0), ({"phase": "decode"}, 35.0)],
        f"{names.PHASE_SECONDS}_count": [({"phase": "queue"}, 10.0), ({"phase": "decode"}, 10.0)],
        names.VLLM_NUM_REQUESTS_WAITING: [({}, 6.0)],
        names.VLLM_KV_CACHE_USAGE_PERC: [({}, kv)],
        names.VLLM_NUM_PREEMPTIONS_TOTAL: [({}, 0.0)],
        names.VLLM_NUM_REQUESTS_RUNNING: [({}, 8.0)],
    }


def _gather(answers: dict[str, Answer]) -> tuple[Window, tuple[str, ...], list[str]]:
    transport, asked = _prometheus(answers)
    sources = Sources(prometheus="http://prom.test:9090", lanes=("slow",), window="10m")
    slos = {"slow": SloTargets(ttft_s=2.0, tpot_s=0.05)}
    window, queries = gather(sources, slos, (), transport=transport)
    return window, queries, asked


def test_a_queue_bound_lane_with_room_in_kv_is_compute_bound_and_shows_its_queries() -> None:
    window, queries, asked = _gather(_queue_bound(kv=0.5))
    found = top_findings(diagnose(window))
    assert [f.check for f in found] == ["queue/compute"]
    top = found[0]
    assert top.explains is not None and top.explains.share == pytest.approx(2.4 / 2.5)
    waiting = next(s for s in top.evidence if s.signal.startswith("waiting"))
    assert waiting.source == f'sum(avg_over_time({names.VLLM_NUM_REQUESTS_WAITING}{{lane="slow"}}[10m]))'
    assert waiting.source in queries and list(queries) == asked


def test_kv_at_the_limit_is_kv_memory() -> None:
    window, _, _ = _gather(_queue_bound(kv=0.95))
    assert [f.check for f in top_findings(diagnose(window))] == ["queue/kv-memory"]


def test_a_family_prometheus_lacks_is_unknown_naming_it() -> None:
    answers = _queue_bound(kv=0.5)
    del answers[names.VLLM_KV_CACHE_USAGE_PERC]
    window, _, _ = _gather(answers)
    by_id = {f.check: f for f in diagnose(window)[0].findings}
    assert by_id["queue/kv-memory"].verdict == "unknown"
    assert names.VLLM_KV_CACHE_USAGE_PERC in by_id["queue/kv-memory"].missing
    assert by_id["spec-decode/acceptance"].verdict == "unknown"
    assert by_id["queue/unsplit"].verdict == "finding"  # the phase still stands, its cause unsplit


def test_the_older_kv_name_is_queried_too() -> None:
    q = LaneQueries("slow", "5m").gauge(names.VLLM_KV_CACHE_USAGE_PERC, "max")
    assert q == (
        'max(avg_over_time(vllm:kv_cache_usage_perc{lane="slow"}[5m]))'
        ' or max(avg_over_time(vllm:gpu_cache_usage_perc{lane="slow"}[5m]))'
    )


def test_a_lane_label_is_escaped() -> None:
    assert LaneQueries('a"b', "5m").sel == '{lane="a\\"b"}'


@pytest.mark.parametrize(
    ("response", "said"),
    [
        (httpx.Response(400, json={"status": "error", "error": "parse error"}), "parse error"),
        (httpx.Response(502, text="bad gateway"), "not JSON"),
        (
            httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}),
            "matrix",
        ),
    ],
)
def test_a_bad_answer_is_an_input_error_naming_the_flag(response: httpx.Response, said: str) -> None:
    transport = httpx.MockTransport(lambda _: response)
    sources = Sources(prometheus="http://prom.test", lanes=("slow",))
    with pytest.raises(DiagnoseInputError) as err:
        gather(sources, {}, transport=transport)
    assert str(err.value).startswith("--prometheus: ") and said in str(err.value)


def test_nan_answers_count_as_missing() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        body = {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "NaN"]}]},
        }
        return httpx.Response(200, content=json.dumps(body))

    sources = Sources(prometheus="http://prom.test", lanes=("slow",))
    window, _ = gather(sources, {}, transport=httpx.MockTransport(handle))
    assert window.lanes["slow"].server.kv_usage is None


def test_a_fast_lanes_slow_partner_is_fetched_as_evidence_only() -> None:
    transport, asked = _prometheus({})
    sources = Sources(prometheus="http://prom.test", lanes=("fast",))
    window, _ = gather(sources, {}, (("fast", "slow"),), transport=transport)
    assert sorted(window.lanes) == ["fast", "slow"] and window.diagnosed == ("fast",)
    assert any('lane="slow"' in q for q in asked)


def test_an_answer_past_the_size_bound_is_refused() -> None:
    from lanewatch.collector.diagnose.prometheus import MAX_BODY_BYTES

    huge = httpx.Response(200, content=b"[" + b" " * MAX_BODY_BYTES + b"]")
    sources = Sources(prometheus="http://prom.test", lanes=("slow",))
    with pytest.raises(DiagnoseInputError, match="over 8388608 bytes"):
        gather(sources, {}, transport=httpx.MockTransport(lambda _: huge))


def test_only_the_series_the_chosen_checks_declare_are_asked_for() -> None:
    from lanewatch.collector.diagnose import Thresholds

    transport, asked = _prometheus(_queue_bound(kv=0.5))
    sources = Sources(prometheus="http://prom.test:9090", lanes=("slow",), window="10m")
    spec = Thresholds(checks=("spec-decode/acceptance",))
    window, _ = gather(sources, {}, (), spec, transport=transport)
    assert any(names.VLLM_SPEC_DECODE_NUM_DRAFTS_TOTAL in q for q in asked)
    assert not any(names.VLLM_KV_CACHE_USAGE_PERC in q or names.VLLM_NUM_REQUESTS_WAITING in q for q in asked)
    assert window.lanes["slow"].server.waiting is None
    # every check chosen (the default): vLLM's waiting series is asked for and read
    transport, asked = _prometheus(_queue_bound(kv=0.5))
    window, _ = gather(sources, {}, (), transport=transport)
    assert any(names.VLLM_NUM_REQUESTS_WAITING in q for q in asked)
    assert window.lanes["slow"].server.waiting is not None
