"""A real Prometheus for tests: the default spec's rules (a wait shortened), loopback targets, its alerts.

rules = rules_with_waits(tmp_path, {"controllerNoLeader": 8})
base = stack.enter_context(start_prometheus(tmp_path, rules, {"lanewatch-degrade": targets}))
alert_state(base, "LanewatchDegradeNoLeader")   # "pending", "firing" or None
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from lanewatch.alerts.build import rule_files
from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec
from tests.conftest import require_binary
from tests.servers import free_port, started, wait_http


def rules_with_waits(folder: Path, waits_s: Mapping[str, int]) -> Path:
    """The default spec's rule file, each named `alerts.<name>` waiting the given seconds (not its
    shipped `for`): an alert's behaviour checked in seconds, not minutes."""
    text = DEFAULT_SPEC.read_text()
    for name, seconds in waits_s.items():
        text, found = re.subn(rf"\b{name}: \{{for: [0-9a-z]+\}}", f"{name}: {{for: {seconds}s}}", text)
        assert found == 1, name  # the line this shortens, as the default spec writes it
    path = folder / "slos.yaml"
    path.write_text(text)
    [(name, rules)] = rule_files([load_spec(path)]).items()
    out = folder / name
    out.write_text(rules)
    return out


def job(name: str, targets: list[str], labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One scrape job of `host:port` targets, with labels on its series when given."""
    static: dict[str, Any] = {"targets": targets}
    if labels:
        static["labels"] = dict(labels)
    return {"job_name": name, "static_configs": [static]}


@contextmanager
def start_prometheus(
    folder: Path, jobs: Sequence[dict[str, Any]], rules: Sequence[Path] = ()
) -> Iterator[str]:
    """Prometheus 2.42 scraping `jobs` (`job`'s) every second and evaluating `rules` every second,
    until the block exits; yields its URL."""
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(r) for r in rules],
        "scrape_configs": list(jobs),
    }
    (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
    cmd = [
        require_binary("prometheus"),
        f"--config.file={folder / 'prometheus.yml'}",
        f"--storage.tsdb.path={folder / 'prometheus-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    log = folder / "prometheus.log"
    with started(cmd, log) as proc:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/-/ready", proc, lambda: log.read_text(errors="replace"), timeout_s=30)
        yield base


def alert_state(base: str, alertname: str) -> str | None:
    """An alert's state in Prometheus: "firing" when any of its series fires, "pending", or None."""
    alerts = httpx.get(f"{base}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
    states = {a["state"] for a in alerts if a["labels"]["alertname"] == alertname}
    return "firing" if "firing" in states else "pending" if states else None


def query_value(base: str, query: str) -> float | None:
    """An instant query's one value (None: no series)."""
    data = httpx.get(f"{base}/api/v1/query", params={"query": query}, timeout=5).json()["data"]
    return float(data["result"][0]["value"][1]) if data["result"] else None
