"""Workers' /metrics pages merged into one: the same page one process would have rendered."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from lanewatch.exporters import names
from lanewatch.exporters.page_merge import merge_pages
from lanewatch.exporters.prometheus import RequestMetrics
from tests.unit.exporters.report.sample_records import sample_records


def _page(records: list[object]) -> str:
    metrics = RequestMetrics(None, 50)
    for record in records:
        metrics.observe(record)  # type: ignore[arg-type]
    return metrics.exposition()


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): float(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_two_workers_pages_merge_into_the_page_of_one_that_saw_every_record() -> None:
    records = sample_records(400)
    one = _page(records)  # type: ignore[arg-type]
    merged = merge_pages([_page(records[::2]), _page(records[1::2])])  # type: ignore[arg-type]
    assert _samples(merged) == _samples(one)  # counters and histogram buckets, sums and counts summed
    families = [f.name for f in text_string_to_metric_families(merged)]
    assert families == [f.name for f in text_string_to_metric_families(one)]  # each family once, in order


GAUGES = f"""# HELP {names.GATEWAY_INFLIGHT} In flight.
# TYPE {names.GATEWAY_INFLIGHT} gauge
{names.GATEWAY_INFLIGHT}{{lane="fast",upstream="a:1"}} %s
# HELP {names.GATEWAY_UPSTREAM_HEALTHY} Healthy.
# TYPE {names.GATEWAY_UPSTREAM_HEALTHY} gauge
{names.GATEWAY_UPSTREAM_HEALTHY}{{lane="fast",upstream="a:1"}} %s
# HELP {names.GATEWAY_DEGRADE_STATE_VERSION} Version.
# TYPE {names.GATEWAY_DEGRADE_STATE_VERSION} gauge
{names.GATEWAY_DEGRADE_STATE_VERSION} %s
# HELP {names.GATEWAY_REQUESTS_TOTAL} Requests.
# TYPE {names.GATEWAY_REQUESTS_TOTAL} counter
{names.GATEWAY_REQUESTS_TOTAL}{{lane="fast"}} %s
"""


def test_gauges_sum_in_flight_and_agree_on_health_and_version() -> None:
    merged = _samples(merge_pages([GAUGES % (2, 1, 3, 5), GAUGES % (3, 0, 3, 7)]))
    assert merged[(names.GATEWAY_INFLIGHT, (("lane", "fast"), ("upstream", "a:1")))] == 5
    assert merged[(names.GATEWAY_UPSTREAM_HEALTHY, (("lane", "fast"), ("upstream", "a:1")))] == 0
    assert merged[(names.GATEWAY_DEGRADE_STATE_VERSION, ())] == 3
    assert merged[(names.GATEWAY_REQUESTS_TOTAL, (("lane", "fast"),))] == 12


def test_an_exited_workers_counters_stay_and_its_gauges_go() -> None:
    merged = _samples(merge_pages([GAUGES % (1, 1, 3, 5)], retired=[GAUGES % (4, 1, 3, 7)]))
    assert merged[(names.GATEWAY_REQUESTS_TOTAL, (("lane", "fast"),))] == 12
    assert merged[(names.GATEWAY_INFLIGHT, (("lane", "fast"), ("upstream", "a:1")))] == 1
    alone = _samples(merge_pages([], retired=[GAUGES % (4, 1, 3, 7)]))
    assert alone == {(names.GATEWAY_REQUESTS_TOTAL, (("lane", "fast"),)): 7}


def test_series_one_worker_has_are_kept_and_created_keeps_the_earliest() -> None:
    a = '# HELP x_total X.\n# TYPE x_total counter\nx_total{k="a"} 1.0\nx_created{k="a"} 50.0\n'
    b = '# HELP x_total X.\n# TYPE x_total counter\nx_total{k="b"} 2.0\nx_created{k="a"} 40.0\n'
    text = merge_pages([a, b])
    assert text.count("# TYPE x_total counter") == 1
    assert _samples(text) == {
        ("x_total", (("k", "a"),)): 1.0,
        ("x_created", (("k", "a"),)): 40.0,
        ("x_total", (("k", "b"),)): 2.0,
    }
    assert merge_pages([]) == ""
