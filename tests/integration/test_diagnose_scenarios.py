"""The scenario matrix: the simulator runs each condition it can produce, the prober records it (vLLM's
spans joined where one probe runs at a time), and `lanewatch diagnose` on the records names the
intended check as its top finding, with no other finding the scenario did not cause. Healthy runs
yield no finding at all. Conditions whose cause only vLLM's series can split (KV memory, compute,
speculative decoding) run against a real Prometheus in test_diagnose_prometheus.py; together the
two lists cover every registered check.

docs/diagnose.md ("Scenario matrix") holds the table diagnose_matrix.py renders from both lists; a
unit test keeps the page in step and checks that the lists cover every registered check.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.diagnose_matrix import (
    SCENARIOS,
    Probe,
    Run,
    Scenario,
)
from tests.servers import free_port, lanewatch_command, start_simulator

pytestmark = pytest.mark.integration
# Load from tests beside them moves a healthy lane's P99 and the interference's overlap toward their
# thresholds, so those run in `make test`'s serial pass; the rest hold under it.
LOAD_SENSITIVE = {name for name, sc in SCENARIOS.items() if sc.expected is None} | {
    "prefill/decode interference"
}
PARAMS = [
    pytest.param(name, marks=pytest.mark.serial) if name in LOAD_SENSITIVE else name for name in SCENARIOS
]


def _probe_args(
    sim_url: str, model: str, lane: str, probe: Probe, config: Path, port: int | None
) -> list[str]:
    args = ["probe", sim_url, "-m", model, "-n", str(probe.requests), "--lane", lane, "--json"]
    args += ["--class", probe.request_class, "-c", str(config), "--interval", str(probe.interval_s)]
    if probe.cold:
        args.append("--cold")
    if sim_url.startswith("https://"):
        args.append("--insecure")
    if port is not None:
        args += ["--otlp-listen", f"127.0.0.1:{port}", "--join-wait", "2"]
    return [*lanewatch_command(), *args]


def _run_lane(tmp_path: Path, run: Run, config: Path) -> list[str]:
    """One simulator with its probes (at once when several streams); the records' lines."""
    port = free_port()
    joined = run.joined
    traces = f"http://127.0.0.1:{port}/v1/traces" if joined else None
    flags: dict[str, Any] = dict(run.sim)
    faults = flags.pop("faults", None)
    # seed 1: its draws hit a 0.3 error rate about as often as the rate says (seed 0's first 24 miss it)
    with start_simulator(
        tmp_path, profile=run.profile, otlp_endpoint=traces, faults=faults, seed=1, **flags
    ) as sim:
        cmds = [
            _probe_args(sim.url, sim.model, run.profile, p, config, port if joined else None)
            for p in run.probes
        ]
        if joined:  # one after another: each listens for the spans on the same port
            done = [subprocess.run(cmd, capture_output=True, text=True, timeout=240) for cmd in cmds]
            outs = [(d.returncode, d.stdout, d.stderr) for d in done]
        else:
            procs = [
                subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for cmd in cmds
            ]
            talked = [proc.communicate(timeout=240) for proc in procs]
            outs = [(proc.returncode, o, e) for proc, (o, e) in zip(procs, talked, strict=True)]
    lines = []
    for rc, out, err in outs:
        assert rc in (0, 1), err
        lines += [line for line in out.splitlines() if line.startswith("{")]
    assert len(lines) == sum(p.requests for p in run.probes)
    return lines


def _records(tmp_path: Path, sc: Scenario) -> Path:
    """Every run's records in one file."""
    config = tmp_path / "classes.yaml"
    config.write_text(yaml.safe_dump({"probe": {"classes": [c.model_dump() for c in sc.classes]}}))
    out = tmp_path / "records.jsonl"
    lines = [line for run in sc.runs for line in _run_lane(tmp_path, run, config)]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _diagnose(path: Path) -> dict[str, Any]:
    done = subprocess.run(
        [*lanewatch_command(), "diagnose", str(path), "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (0, 1), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    assert (done.returncode == 1) == (doc["found"] > 0)
    return doc


@pytest.mark.parametrize("name", PARAMS)
def test_each_condition_is_diagnosed_as_itself(tmp_path: Path, name: str) -> None:
    sc = SCENARIOS[name]
    doc = _diagnose(_records(tmp_path, sc))
    lanes = {lane["lane"]: lane for lane in doc["lanes"]}
    assert set(lanes) == {run.profile for run in sc.runs}
    for lane_name, lane in lanes.items():
        found = [f["check"] for f in lane["findings"] if f["verdict"] == "finding"]
        print(f"{name}, {lane_name} lane: {found or 'no finding'}")
        if sc.expected is None or lane_name != sc.lane:
            assert found == [], lane["findings"][:3]
            continue
        assert found and found[0] == sc.expected, lane["findings"][:3]
        assert set(found[1:]) <= sc.also, found
    records = [json.loads(line) for line in (tmp_path / "records.jsonl").open()]
    joined = sum(r["queue_s"] is not None for r in records if r["lane"] == sc.lane)
    if sc.runs[0].joined:
        assert joined >= sc.runs[0].probes[0].requests // 2  # the queue and prefill came from vLLM's spans
