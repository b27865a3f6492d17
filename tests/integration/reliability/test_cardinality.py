"""A flood of distinct label values stays capped at export.max_label_values (then `__overflow__`).

Through the gateway, clients choose the model name (the request class is the gateway's: an
untrusted client's header is ignored); through the collector, the targets' names, lanes and
models do. Neither /metrics may grow a series per value: each free-form label keeps at most
the cap's values plus the overflow value, and the lane, a closed set from the config, keeps
every configured lane and never folds.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.exporters.names import OVERFLOW_VALUE
from tests.servers import SimHandle, free_port
from tests.waiting import eventually

from .processes import Service, samples, service, write_yaml

pytestmark = pytest.mark.integration

CAP = 8
FREE_LABELS = ("target", "lane", "request_class", "model")


def label_values(text: str) -> dict[str, set[str]]:
    """Every value each free-form label takes on a /metrics page, over all lanewatch series."""
    out: dict[str, set[str]] = defaultdict(set)
    for family in text_string_to_metric_families(text):
        if family.name.startswith("lanewatch_gateway_"):
            continue  # the gateway's own counters: lanes and upstreams from its config
        for s in family.samples:
            for label in FREE_LABELS:
                if label in s.labels:
                    out[label].add(s.labels[label])
    return out


def test_gateway_caps_client_chosen_models_and_classes(tmp_path: Path, sim: SimHandle) -> None:
    port = free_port()
    cfg = write_yaml(
        tmp_path / "gateway.yaml",
        {
            "gateway": {
                "server": {"host": "127.0.0.1", "port": port},
                "lanes": {"sim": {"upstreams": [sim.url]}},
            },
            "export": {"max_label_values": CAP},
        },
    )
    with service(["gateway", "-c", str(cfg)], port, tmp_path / "gateway.log", "/metrics") as gw:
        statuses = flood(gw, sim.model, 300)
        text = wait_counted(gw, 300)  # the tap records a request as its response ends
        gw.alive()
    assert statuses[200] >= 100 and statuses[404] >= 100, statuses  # flooded with hits and misses
    values = label_values(text)
    assert len(values["model"]) <= CAP + 1 and OVERFLOW_VALUE in values["model"], values["model"]
    assert values["request_class"] == {"interactive"}  # an untrusted client's class header is ignored
    overflow = [
        (labels, v)
        for labels, v in samples(text, "lanewatch_requests_total")
        if OVERFLOW_VALUE in labels.values()
    ]
    # Every other request names a fresh model: past the cap those fold. Whether the served model's
    # own requests fold too depends on whether its name took a slot before the cap filled.
    assert sum(v for _, v in overflow) >= 300 // 2 - CAP
    assert sum(v for _, v in samples(text, "lanewatch_requests_total")) == 300  # none lost to the fold


def flood(gw: Service, model: str, n: int) -> dict[int, int]:
    """n requests from 4 clients, each with a new model name (every other one the served model,
    which the sim answers) and a new request class."""
    statuses: dict[int, int] = defaultdict(int)
    lock = threading.Lock()

    def client(k: int) -> None:
        with httpx.Client(base_url=gw.url, timeout=10) as c:
            for i in range(k, n, 4):
                name = model if i % 2 else f"model-{i}"
                body = {"model": name, "messages": [{"role": "user", "content": "x"}], "max_tokens": 2}
                r = c.post(
                    "/v1/chat/completions",
                    json={**body, "stream": True},
                    headers={"x-lanewatch-class": f"c{i}"},
                )
                with lock:
                    statuses[r.status_code] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return statuses


def test_collector_caps_targets_lanes_and_models(tmp_path: Path, sim: SimHandle) -> None:
    port = free_port()
    # 2 x CAP targets, each its own lane; half serve under the sim's model, half under made-up ones
    targets = [
        {
            "name": f"t{i:02}",
            "url": sim.url,
            "lane": f"lane{i:02}",
            "model": sim.model if i % 2 else f"m{i}",
            "scrape": False,
        }
        for i in range(2 * CAP)
    ]
    cfg = write_yaml(
        tmp_path / "collect.yaml",
        {
            "targets": targets,
            "probe": {"interval_s": 0.5, "classes": [{"name": "short", "prompt_words": 4, "max_tokens": 2}]},
            "otlp": {"enabled": False},
            "gpu": {"enabled": False},
            "export": {"max_label_values": CAP},
            "server": {"host": "127.0.0.1", "port": port},
        },
    )
    served = {str(t["lane"]) for t in targets if t["model"] == sim.model}  # the others fail: no latencies
    with service(["collect", "-c", str(cfg)], port, tmp_path / "collect.log", "/healthz") as col:
        wait_counted(col, 2 * len(targets))  # each target probed about twice
        # The window's quantiles are summarised off the loop, a moment behind the counters.
        text = eventually(
            lambda: _page_with_quantiles_of(col, served),
            20,
            "the window's quantiles keep every lane",
            context=lambda: col.log()[-2000:],
        )
        col.alive()
    values = label_values(text)
    for label in ("target", "model"):
        assert len(values[label]) <= CAP + 1 and OVERFLOW_VALUE in values[label], (label, values[label])
    # the lanes are a closed set (the targets'): none folds, and the cap leaves them be
    lanes = {t["lane"] for t in targets}
    assert values["lane"] == lanes, values["lane"]
    assert _quantile_lanes(text) == served


def _page_with_quantiles_of(svc: Service, lanes: set[str]) -> str:
    """The /metrics page once the window's quantiles have every one of `lanes`, else ''."""
    text = svc.metrics()
    return text if lanes <= _quantile_lanes(text) else ""


def _quantile_lanes(text: str) -> set[str]:
    """The lanes the window's quantile gauge has series for."""
    return {labels["lane"] for labels, _ in samples(text, "lanewatch_window_quantile_seconds")}


def wait_counted(svc: Service, n: int) -> str:
    """The /metrics page once it counts n requests (capped labels, but every request counted)."""

    def counted() -> str:
        text = svc.metrics()
        return text if sum(v for _, v in samples(text, "lanewatch_requests_total")) >= n else ""

    return eventually(counted, 20, f"/metrics counts {n} requests", context=lambda: svc.log()[-2000:])
