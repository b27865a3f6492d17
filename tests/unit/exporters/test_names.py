from __future__ import annotations

import re

from prometheus_client.utils import floatToGoString

from lanewatch.exporters import names


def test_le_matches_prometheus_client() -> None:
    for bound in (*names.LATENCY_BUCKETS, float("inf")):
        assert names.le(bound) == floatToGoString(bound)  # type: ignore[no-untyped-call]


def test_metric_names_follow_prometheus_conventions() -> None:
    metric = re.compile(r"^lanewatch_[a-z0-9_]+$")
    for key, value in vars(names).items():
        if not (key.isupper() and isinstance(value, str) and value.startswith("lanewatch_")):
            continue
        assert metric.match(value), value
        if key.endswith("_TOTAL"):
            assert value.endswith("_total"), value
        if key.endswith("_SECONDS"):
            assert value.endswith("_seconds"), value


def test_buckets_sorted_and_fine_below_100ms() -> None:
    b = names.LATENCY_BUCKETS
    assert list(b) == sorted(b)
    assert b[0] == 0.001 and b[-1] == 60.0
    assert len([x for x in b if x <= 0.1]) >= 10
