"""Alert-to-degrade time in the closed loop: Alertmanager → degrade controller → gateway.

Real processes on loopback: Alertmanager 0.25 (Debian's `prometheus-alertmanager`) routed as
deploy/alertmanager/alertmanager.yml routes pages to the controller (`group_wait: 1s`,
`group_interval: 5s`, bearer token from a file), `lanewatch degrade serve` with the
default policy, and `lanewatch gateway` over a fast and a slow lane. Each trial posts a
firing page for the slow lane to Alertmanager's v2 API (a new alert name each time, so
each opens a new group and waits group_wait, as a first page does) and polls:

- the controller's `lanewatch_degrade_notifications_total` (when the webhook arrived),
- the gateway's `GET /admin/degrade` (when the slow lane's shift shows),

then posts the alert resolved and waits for the lane to be restored. Alert-to-degrade is
post → shift visible; it splits into Alertmanager (post → webhook received; group_wait is
most of it) and controller + adapter (webhook → gateway state changed). Restore includes
the next group_interval flush and the controller's recovery_stable_s.

Run alone: `python -m bench.degrade_loop [--trials 5]`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from lanewatch.collector.record.window import summarize
from tests.integration.degrade.loopback import running, wait_http
from tests.integration.gateway_harness import start_gateway, start_test_upstream
from tests.servers import free_port, lanewatch_command

__all__ = ["run_degrade_loop"]

GROUP_WAIT, GROUP_INTERVAL = "1s", "5s"  # deploy/alertmanager/alertmanager.yml's degrade route
MIN_HOLD_S, RECOVERY_STABLE_S, TICK_S = 0.5, 0.5, 0.1
POLL_S = 0.005


def find_alertmanager() -> str | None:
    """Debian's Alertmanager binary."""
    return shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")


def _am_config(tmp: Path, controller_port: int, token_file: Path, group_interval: str) -> Path:
    route = {"group_by": ["alertname", "lane"], "group_wait": GROUP_WAIT, "group_interval": group_interval}
    config = {
        "route": {"receiver": "lanewatch-degrade", "repeat_interval": "1h", **route},
        "receivers": [
            {
                "name": "lanewatch-degrade",
                "webhook_configs": [
                    {
                        "url": f"http://127.0.0.1:{controller_port}/alertmanager",
                        "send_resolved": True,
                        "http_config": {
                            "authorization": {"type": "Bearer", "credentials_file": str(token_file)}
                        },
                    }
                ],
            }
        ],
    }
    path = tmp / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _post(am: str, name: str, starts: str, ends: str | None = None) -> None:
    labels = {"alertname": name, "lane": "slow", "severity": "page", "slo": "ttft"}
    alert: dict[str, Any] = {"labels": labels, "annotations": {"summary": "bench"}, "startsAt": starts}
    if ends is not None:
        alert["endsAt"] = ends
    r = httpx.post(f"{am}/api/v2/alerts", json=[alert], timeout=5)
    r.raise_for_status()


def _wait(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll until `check()`; the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(POLL_S)
    raise RuntimeError(f"not within {timeout} s: {what}")


@contextmanager
def _loop(tmp: Path, binary: str, group_interval: str) -> Iterator[tuple[str, str, str, dict[str, str]]]:
    """Upstreams, gateway, controller and Alertmanager: (am, controller, gateway, admin headers)."""
    am_token, gw_token = tmp / "am.token", tmp / "gw.token"
    am_token.write_text("bench-am-token")
    gw_token.write_text("bench-gw-token")
    controller_port, am_port = free_port(), free_port()
    with ExitStack() as stack:
        fast = stack.enter_context(start_test_upstream(tmp, first_ms=1, gap_ms=1))
        slow = stack.enter_context(start_test_upstream(tmp, first_ms=1, gap_ms=1))
        gw = stack.enter_context(
            start_gateway(tmp, [f"fast={fast}", f"slow={slow}"], "--admin-token-file", str(gw_token))
        )
        serve = [
            *lanewatch_command(), "degrade", "serve", "--host", "127.0.0.1", "--port", str(controller_port),
            "--token-file", str(am_token), "--gateway", gw.url, "--gateway-token-file", str(gw_token),
            "--state-dir", str(tmp / "state"), "--min-hold-s", str(MIN_HOLD_S),
            "--recovery-stable-s", str(RECOVERY_STABLE_S), "--tick-s", str(TICK_S), "--log-level", "warning",
        ]  # fmt: skip
        controller = stack.enter_context(running(serve, tmp / "controller.log"))
        am_cmd = [
            binary, f"--config.file={_am_config(tmp, controller_port, am_token, group_interval)}",
            f"--storage.path={tmp / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=", "--log.level=warn",
        ]  # fmt: skip
        am = stack.enter_context(running(am_cmd, tmp / "alertmanager.log"))
        controller_url, am_url = f"http://127.0.0.1:{controller_port}", f"http://127.0.0.1:{am_port}"
        wait_http(f"{controller_url}/healthz", controller)
        wait_http(f"{am_url}/-/ready", am)
        yield am_url, controller_url, gw.url, {"Authorization": "Bearer bench-gw-token"}


def _notifications(client: httpx.Client, controller: str) -> float:
    text = client.get(f"{controller}/metrics").text
    prefix = "lanewatch_degrade_notifications_total{"
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))


def _shift(client: httpx.Client, gateway: str, auth: dict[str, str]) -> int:
    lanes = client.get(f"{gateway}/admin/degrade", headers=auth).json()["lanes"]
    return int(lanes.get("slow", {}).get("shift_percent", 0))


def _trial(
    client: httpx.Client, am: str, controller: str, gateway: str, auth: dict[str, str], n: int
) -> dict[str, float]:
    name = f"LanewatchBenchPage{n}"
    seen = _notifications(client, controller)
    starts = _now()
    t0 = time.monotonic()
    _post(am, name, starts)
    t_hook = _wait(
        lambda: _notifications(client, controller) > seen, 30, "the webhook reached the controller"
    )
    t_shift = _wait(lambda: _shift(client, gateway, auth) >= 50, 30, "the gateway shifted the slow lane")
    time.sleep(MIN_HOLD_S)
    t1 = time.monotonic()
    _post(am, name, starts, ends=_now())
    t_back = _wait(lambda: _shift(client, gateway, auth) == 0, 60, "the slow lane restored")
    return {
        "alert_to_degrade_s": t_shift - t0,
        "alertmanager_s": t_hook - t0,
        "controller_to_gateway_s": t_shift - t_hook,
        "resolve_to_restore_s": t_back - t1,
    }


def run_degrade_loop(trials: int, tmp: Path, group_interval: str = GROUP_INTERVAL) -> dict[str, Any]:
    """`trials` fire/resolve cycles; per-step times summarised in seconds."""
    tmp.mkdir(parents=True, exist_ok=True)
    binary = find_alertmanager()
    if binary is None:
        raise RuntimeError("prometheus-alertmanager not found: install Debian's (make tools does, as root)")
    rows = []
    with (
        _loop(tmp, binary, group_interval) as (am, controller, gateway, auth),
        httpx.Client(timeout=5) as client,
    ):
        for n in range(trials):
            rows.append(_trial(client, am, controller, gateway, auth, n))
    out: dict[str, Any] = {
        "trials": trials,
        "group_wait": GROUP_WAIT,
        "group_interval": group_interval,
        "min_hold_s": MIN_HOLD_S,
        "recovery_stable_s": RECOVERY_STABLE_S,
        "tick_s": TICK_S,
    }
    for key in rows[0]:
        s = summarize(r[key] for r in rows)
        assert s is not None
        out[key] = {"p50": round(s.p50, 5), "max": round(s.max, 5), "min": round(s.min, 5)}
    return out


def flat_keys(r: dict[str, Any]) -> dict[str, float]:
    """The results.json keys of this part."""
    return {
        "alert_to_degrade_s_p50": r["alert_to_degrade_s"]["p50"],
        "alert_to_degrade_s_max": r["alert_to_degrade_s"]["max"],
        "alertmanager_to_webhook_s_p50": r["alertmanager_s"]["p50"],
        "controller_to_gateway_ms_p50": round(r["controller_to_gateway_s"]["p50"] * 1e3, 2),
        "resolve_to_restore_s_p50": r["resolve_to_restore_s"]["p50"],
    }


def main() -> None:
    """Run this part alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_degrade_loop(args.trials, Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
