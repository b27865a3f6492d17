"""results.json → the goals met or not, and results.md. Pure: no I/O, no clock."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .report_scale import scale_sections

__all__ = ["Goal", "evaluate_goals", "render"]

PATH_ORDER = (
    "direct", "nginx", "nginx-2", "envoy", "envoy-2", "envoy-lanewatch", "envoy-lanewatch-end", "litellm",
    "litellm-lanewatch", "pipe", "tap", "tap-rescue", "tap-2", "tap-metrics", "tap-content", "aiohttp",
)  # fmt: skip


@dataclass(frozen=True)
class Goal:
    """One goal: what it asks, where it comes from, the figure measured and the limit it had to meet."""

    id: str
    goal: str
    source: str
    key: str
    measured: float | None
    limit: float | None
    unit: str
    met: bool | None  # None: not measured in this run
    at_least: bool = False  # the figure must reach the limit rather than stay under it


def _num(keys: Mapping[str, Any], key: str) -> float | None:
    value = keys.get(key)
    return float(value) if isinstance(value, int | float) else None


def _goal(
    keys: Mapping[str, Any],
    id_: str,
    text: str,
    source: str,
    key: str,
    unit: str,
    limit: Callable[[Mapping[str, Any]], float | None],
    at_least: bool = False,
) -> Goal:
    measured = _num(keys, key)
    bound = limit(keys)
    met = (
        None if measured is None or bound is None else (measured >= bound if at_least else measured <= bound)
    )
    return Goal(id_, text, source, key, measured, bound, unit, met, at_least)


def _times(factor: float, key: str, plus: float = 0.0) -> Callable[[Mapping[str, Any]], float | None]:
    """factor × keys[key] + plus, the reference clamped at 0 (a proxy cannot add negative time)."""

    def limit(keys: Mapping[str, Any]) -> float | None:
        ref = _num(keys, key)
        return None if ref is None else round(factor * max(ref, 0.0) + plus, 4)

    return limit


def _fixed(value: float) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda _keys: value


def evaluate_goals(keys: Mapping[str, Any]) -> list[Goal]:
    """Every goal of the project (latency, CPU, accuracy, memory) against the measured keys."""
    p99, p50 = "tap_added_ttft_p99_ms_64", "tap_added_ttft_p50_ms_64"
    own = "each proxy on a core of its own"
    return [
        _goal(keys, "tap_p99_abs", "the tap adds ≤ 1 ms to TTFT p99 at 64 streams", "project goal", p99, "ms",
              _fixed(1.0)),
        _goal(keys, "tap_p99_vs_nginx", "the tap adds ≤ 1.5 × nginx's added TTFT p99 at 64 streams",
              "project goal", p99, "ms", _times(1.5, "nginx_added_ttft_p99_ms_64")),
        _goal(keys, "tap_p99_pinned", f"the tap adds ≤ 1 ms to TTFT p99 at 64 streams, {own}", "project goal",
              f"{p99}_pinned", "ms", _fixed(1.0)),
        _goal(keys, "tap_p99_vs_nginx_pinned",
              f"the tap adds ≤ 1.5 × nginx's added TTFT p99 at 64 streams, {own}", "project goal",
              f"{p99}_pinned", "ms", _times(1.5, "nginx_added_ttft_p99_ms_64_pinned")),
        _goal(keys, "tap_p50", "the tap adds ≤ 1.0 ms to TTFT p50 at 64 streams", "performance target",
              p50, "ms", _fixed(1.0)),
        *_peer_goals(keys),
        _goal(keys, "probe_p99", "prober TTFT error ≤ 2 ms p99", "project goal", "probe_ttft_error_p99_ms",
              "ms", _fixed(2.0)),
        _goal(keys, "collector_rss", "collector ≤ 100 MB RSS (peak, 10 probes/s, 10 targets)",
              "project goal", "collector_rss_peak_mb", "MB", _fixed(100.0)),
        *_scale_goals(keys),
        _goal(keys, "diagnose_records",
              "`lanewatch diagnose FILE`: ≥ 40,000 records per CPU s (100,000 records, the start included)",
              "project goal", "diagnose_records_per_cpu_s", "/s", _fixed(40_000.0), at_least=True),
        _goal(keys, "diagnose_prometheus",
              "`lanewatch diagnose --prometheus`, one window, two lanes, ≤ 3 CPU s (Prometheus's too)",
              "project goal", "diagnose_prometheus_cpu_s", "s", _fixed(3.0)),
    ]  # fmt: skip


def _peer_goals(keys: Mapping[str, Any]) -> list[Goal]:
    """The tap against its peers at 64 streams: Envoy (one worker thread) and the LiteLLM proxy.

    The tap's CPU per chunk and added TTFT p50 are held to Envoy's, a general proxy in compiled
    code as the tap's peer; nginx's figures stay in the tables as context, with no goal (nor any
    goal at 256 or 512 streams, where the client and the upstream take most of the two cores).
    """
    p50, cpu = "tap_added_ttft_p50_ms_64", "tap_cpu_s_per_1k_chunks_64"
    return [
        _goal(keys, "tap_cpu_vs_envoy", "tap CPU per 1,000 chunks ≤ 1.5 × Envoy's at 64 streams (one thread)",
              "peer goal", cpu, "s", _times(1.5, "envoy_cpu_s_per_1k_chunks_64")),
        _goal(keys, "tap_p50_vs_envoy", "the tap adds ≤ Envoy's TTFT p50 + 0.5 ms at 64 streams (one thread)",
              "peer goal", p50, "ms", _times(1.0, "envoy_added_ttft_p50_ms_64", 0.5)),
        _goal(keys, "tap_p50_vs_litellm",
              "the tap's added TTFT p50 far below the LiteLLM proxy's (≤ ¼ of it) at 64 streams", "peer goal",
              p50, "ms", _times(0.25, "litellm_added_ttft_p50_ms_64")),
    ]  # fmt: skip


def _scale_goals(keys: Mapping[str, Any]) -> list[Goal]:
    """The collector's costs at fleet scale: per probe, per page, per record, at 1,000 targets."""
    fleet = "one collector, 1,000 targets (probe 10 s, scrape 15 s)"
    return [
        _goal(keys, "probe_cost", "CPU per probe ≤ blackbox_exporter's, same endpoint and body, same run",
              "project goal", "probe_cpu_ms_per_probe", "ms", _times(1.0, "blackbox_cpu_ms_per_probe")),
        _goal(keys, "scrape_parse", "a vLLM /metrics page parses in ≤ 1 ms (p50)", "project goal",
              "scrape_parse_ms_p50", "ms", _fixed(1.0)),
        _goal(keys, "ingest", "≥ 10,000 records/s per core through POST /v1/records, spans for half",
              "project goal", "ingest_records_per_core_s", "/s", _fixed(10_000.0), at_least=True),
        _goal(keys, "fleet_cpu", f"{fleet}: ≤ 1 core", "project goal", "fleet_1000_cpu_cores", "cores",
              _fixed(1.0)),
        _goal(keys, "fleet_rss", f"{fleet}: ≤ 300 MB RSS", "project goal", "fleet_1000_rss_mb", "MB",
              _fixed(300.0)),
        _goal(keys, "fleet_delay", f"{fleet}: probe start delay p99 ≤ 100 ms", "project goal",
              "fleet_1000_start_delay_p99_ms", "ms", _fixed(100.0)),
        _goal(keys, "envoy_record_cost",
              "a collector's CPU per Envoy record ≤ 0.24 ms (64 streams, end entries)", "project goal",
              "envoy_lanewatch_end_collector_cpu_ms_per_record_64", "ms", _fixed(0.24)),
        _goal(keys, "envoy_periodic_cost",
              "a collector's CPU per periodic entry of Envoy's ≤ 45 µs (64 streams)", "project goal",
              "envoy_periodic_collector_cpu_us_per_entry_64", "µs", _fixed(45.0)),
        _goal(keys, "envoy_long_ratio",
              "Envoy's CPU per request with lanewatch's log, flush and tracing ≤ 1.1 × Envoy alone, "
              "10 s answers", "project goal", "envoy_lanewatch_vs_envoy_cpu_ratio_64_10s", "×", _fixed(1.1)),
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------- markdown


def _f(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, int | float):
        return f"{value:,.{digits}f}"
    return str(value)


def _pair(a: Any, b: Any, digits: int = 2, signed: bool = False) -> str:
    fmt = f"{{:+,.{digits}f}}" if signed else f"{{:,.{digits}f}}"
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return "—"
    return f"{fmt.format(a)} / {fmt.format(b)}"


def _verdict(g: Mapping[str, Any]) -> str:
    return {True: "**met**", False: "**not met**", None: "not measured"}[g["met"]]


class _Missing:
    """A figure this run lacks: `?` whatever the format spec."""

    def __format__(self, _spec: str) -> str:
        return "?"


class _Fields(dict[str, Any]):
    """results.json's keys for the notes' `{key}` fields (`{key:.2f}` works); `?` for one this run lacks."""

    def __missing__(self, key: str) -> _Missing:
        return _Missing()


def _why(why: Mapping[str, tuple[str, str]], g: Mapping[str, Any], fields: _Fields) -> str:
    """The note for this goal's outcome: (text when met, text when not)."""
    texts = why.get(g["id"])
    if texts is None or g["met"] is None:
        return ""
    return (texts[0] if g["met"] else texts[1]).format_map(fields)


def _goals_table(
    results: Mapping[str, Any], why: Mapping[str, tuple[str, str]], fields: _Fields
) -> list[str]:
    lines = [
        "| goal | source | measured | limit | verdict | why |",
        "|---|---|---|---|---|---|",
    ]
    for g in results.get("goals", []):
        unit = g["unit"]
        digits = 3 if unit == "s" else 2
        lines.append(
            f"| {g['goal']} | {g['source']} | `{g['key']}` = {_f(g['measured'], digits)} {unit} | "
            f"{_f(g['limit'], digits)} {unit} | {_verdict(g)} | {_why(why, g, fields)} |"
        )
    return lines


_TAP_COLUMNS = (
    "streams", "path", "requests", "chunks/s", "TTFT p50 / p99 (ms)",
    "added TTFT p50 / p99 (ms; p99's range over rounds)", "added chunk delay p50 / p99 (ms)",
    "proxy CPU s / 1k chunks (user part)", "upstream / client CPU s / 1k", "records sink CPU s / 1k",
)  # fmt: skip


def _level(label: str) -> str:
    """A level's name in the tables: "64", or "64, pinned" for "64_pinned"."""
    return label.replace("_pinned", ", pinned")


def _tap_table(levels: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    lines = ["| " + " | ".join(_TAP_COLUMNS) + " |", "|" + "---|" * len(_TAP_COLUMNS)]
    for n, paths in levels.items():
        for name in sorted(paths, key=lambda p: PATH_ORDER.index(p) if p in PATH_ORDER else 99):
            f = paths[name]
            direct = name == "direct"
            added = (
                "—" if direct else _pair(f.get("added_ttft_p50_ms"), f.get("added_ttft_p99_ms"), signed=True)
            )
            if not direct and f.get("added_ttft_p99_ms_range"):
                lo, hi = f["added_ttft_p99_ms_range"]
                added += f" ({lo:+.2f}…{hi:+.2f})"
            delay = (
                "—"
                if direct
                else _pair(f.get("added_chunk_delay_p50_ms"), f.get("added_chunk_delay_p99_ms"), signed=True)
            )
            cpu = "—" if direct else _proxy_cpu(f)
            errors = f" ({f['errors']} errors)" if f.get("errors") else ""
            lines.append(
                f"| {_level(n)} | {name} | {f['requests']:,}{errors} | {f['chunks_per_s']:,.0f} | "
                f"{_pair(f['ttft_p50_ms'], f['ttft_p99_ms'])} | {added} | {delay} | {cpu} | "
                f"{_pair(f['upstream_cpu_s_per_1k_chunks'], f['client_cpu_s_per_1k_chunks'], 4)} | "
                f"{_f(f.get('sink_cpu_s_per_1k_chunks'), 4)} |"
            )
    return lines


def _proxy_cpu(f: Mapping[str, Any]) -> str:
    """A proxy's CPU seconds per 1,000 chunks, its user part in brackets."""
    return f"{_f(f.get('proxy_cpu_s_per_1k_chunks'), 4)} ({_f(f.get('proxy_user_cpu_s_per_1k_chunks'), 4)})"


def _litellm_section(r: Mapping[str, Any], method: str) -> list[str]:
    """LiteLLM alone and with lanewatch's handler, per concurrency, and what the handler adds."""
    lines = [
        f"Measured on {r['date']} apart from the run above ({r['duration_s']} s), {r['rounds']} rounds of "
        f"{r['seconds']:g} s at each concurrency. Load average (1, 5, 15 min) at its start "
        f"{r['load_avg_start']}, at its end {r['load_avg_end']}. {method}",
        "",
        "| streams | path | requests | TTFT p50 / p99 (ms) | added TTFT p50 / p99 (ms) | "
        "the handler's cost, TTFT p50 / p99 (ms; p50's range over rounds) | proxy CPU s / 1k chunks "
        "(user part) | records sink CPU s / 1k |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, paths in r.get("levels", {}).items():
        cost = r.get("cost", {}).get(n)
        for name in sorted(paths, key=lambda p: PATH_ORDER.index(p) if p in PATH_ORDER else 99):
            f = paths[name]
            direct = name == "direct"
            added = (
                "—" if direct else _pair(f.get("added_ttft_p50_ms"), f.get("added_ttft_p99_ms"), signed=True)
            )
            own = "—"
            if name == "litellm-lanewatch" and cost is not None:
                lo, hi = cost["cost_ttft_p50_ms_range"]
                own = _pair(cost["cost_ttft_p50_ms"], cost["cost_ttft_p99_ms"], signed=True)
                own += f" ({lo:+.2f}…{hi:+.2f})"
            cpu = "—" if direct else _proxy_cpu(f)
            errors = f" ({f['errors']} errors)" if f.get("errors") else ""
            lines.append(
                f"| {n} | {name} | {f['requests']:,}{errors} | {_pair(f['ttft_p50_ms'], f['ttft_p99_ms'])} | "
                f"{added} | {own} | {cpu} | {_f(f.get('sink_cpu_s_per_1k_chunks'), 4)} |"
            )
    shipped = r.get("shipped", {})
    if "litellm-lanewatch" in shipped:
        requests = sum(level["litellm-lanewatch"]["requests"] for level in r["levels"].values())
        lines += [
            "",
            f"The handler's records sink took {shipped['litellm-lanewatch']:,} records for the "
            f"{requests:,} requests measured through it (and the warm-ups before each concurrency).",
        ]
    return [*lines, "", *_unavailable(r.get("unavailable", {}))]


def _gross_net(c: Mapping[str, Any], per: str) -> str:
    """The collector's CPU per record or per log entry, as measured and (net of its idle CPU)."""
    gross, net = c.get(f"collector_cpu_ms_per_{per}"), c.get(f"collector_net_cpu_ms_per_{per}")
    if gross is None:
        return "—"
    return f"{_f(gross, 3)} ({_f(net, 3)})"


def _envoy_cost_section(r: Mapping[str, Any], method: str) -> list[str]:
    """Envoy alone and with lanewatch's access log and tracing, per concurrency, and the collector's CPU."""
    lines = [
        f"Measured on {r['date']} apart from the run above ({r['duration_s']} s), {r['rounds']} rounds of "
        f"{r['seconds']:g} s at each concurrency. Load average (1, 5, 15 min) at its start "
        f"{r['load_avg_start']}, at its end {r['load_avg_end']}. {method}",
        "",
        "| streams | path | requests | TTFT p50 / p99 (ms) | over `envoy`: TTFT p50 / p99 (ms; p50's range "
        "over rounds) | Envoy CPU ms / request (over `envoy`) | Envoy CPU s / 1k chunks (user part) | "
        "log entries / periodic / spans per request | collector CPU ms / record (net of idle) | "
        "collector CPU ms / log entry (net of idle) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, paths in r.get("levels", {}).items():
        cost = r.get("cost", {}).get(n, {})
        for name in sorted(paths, key=lambda p: PATH_ORDER.index(p) if p in PATH_ORDER else 99):
            f, c = paths[name], cost.get(name, {})
            direct = name == "direct"
            over = "—"
            if "added_ttft_p50_ms" in c:
                lo, hi = c["added_ttft_p50_ms_range"]
                over = _pair(c["added_ttft_p50_ms"], c["added_ttft_p99_ms"], signed=True)
                over += f" ({lo:+.2f}…{hi:+.2f})"
            per_request = _f(c.get("envoy_cpu_ms_per_request"), 3)
            if "added_envoy_cpu_ms_per_request" in c:
                per_request += f" ({c['added_envoy_cpu_ms_per_request']:+.3f})"
            cpu = "—" if direct else _proxy_cpu(f)
            sent = "—"
            if "log_entries" in c and f["requests"]:
                sent = (
                    f"{c['log_entries'] / f['requests']:.2f} / {c['periodic_per_request']:.2f} / "
                    f"{c['spans_per_request']:.2f}"
                )
            errors = f" ({f['errors']} errors)" if f.get("errors") else ""
            lines.append(
                f"| {n} | {name} | {f['requests']:,}{errors} | {_pair(f['ttft_p50_ms'], f['ttft_p99_ms'])} | "
                f"{over} | {'—' if direct else per_request} | {cpu} | {sent} | "
                f"{_gross_net(c, 'record')} | {_gross_net(c, 'log_entry')} |"
            )
        idle = [
            f"{_f(cost[p]['collector_idle_cpu_ms_per_s'], 1)} (`{p}`)"
            for p in paths
            if "collector_idle_cpu_ms_per_s" in cost.get(p, {})
        ]
        if idle:
            rates = " and ".join(idle)
            lines += [
                "",
                f"Idle, between its samples, each collector spent {rates} ms of CPU a second; the net "
                "figures take that rate over each sample's length off its CPU.",
            ]
        periodic = cost.get("periodic")
        if periodic:
            envoy = _f(periodic["envoy_cpu_us_per_entry"], 1)
            collector = _f(periodic["collector_cpu_us_per_entry"], 1)
            lines += [
                "",
                f"At {n} streams one periodic entry costs Envoy {envoy} µs of CPU and the collector "
                f"{collector} µs (net): the flush row's CPU per request minus the end-only row's, over the "
                "periodic entries per request.",
            ]
    return [*lines, "", *_unavailable(r.get("unavailable", {}))]


def _ratios(results: Mapping[str, Any], levels: Mapping[str, Any]) -> list[str]:
    lines = [
        "| streams | tap ÷ nginx: added TTFT p50 | added TTFT p99 | CPU per chunk | its user part |",
        "|---|---|---|---|---|",
    ]
    for n in levels:
        cells = [_f(results.get(f"tap_vs_nginx_added_ttft_{q}_ratio_{n}")) for q in ("p50", "p99")] + [
            _f(results.get(f"tap_vs_nginx_cpu_ratio_{n}")),
            _f(results.get(f"tap_vs_nginx_user_cpu_ratio_{n}")),
        ]
        lines.append(f"| {_level(n)} | " + " | ".join(cells) + " |")
    return lines


def _unavailable(reasons: Mapping[str, str]) -> list[str]:
    """The peers that could not run here, each with its reason."""
    if not reasons:
        return []
    return [*(f"- `{name}`: not measured here: {why}" for name, why in sorted(reasons.items())), ""]


def _probe_section(p: Mapping[str, Any]) -> list[str]:
    lines = [
        "| probes | connection | failed | TTFT error p50 / p90 / p99 / max (ms) | token mismatches |",
        "|---|---|---|---|---|",
    ]
    for name, label in (
        ("warm_http", "warm keep-alive, HTTP"),
        ("cold_https_localhost", "cold, HTTPS, localhost"),
    ):
        r = p[name]
        e = r["ttft_err_ms"]
        lines.append(
            f"| {r['probes']} | {label} | {r['failed']} | {e['p50']} / {e['p90']} / {e['p99']} / "
            f"{e['max']} | {r['token_mismatches']} |"
        )
    vs = p.get("versus_curl")
    if vs:
        lines += [
            "",
            f"Against `curl -w`, alternating on cold HTTPS connections to the same streamed endpoint "
            f"({vs['samples']} requests each; p50 / p99 ms):",
            "",
            "| phase | prober | curl |",
            "|---|---|---|",
        ]
        for key, label in (("connect", "TCP connect"), ("tls", "TLS handshake"),
                           ("ttfb", "connected → response head (TTFB)"),
                           ("e2e_err", "end of stream − connection phases − true e2e")):  # fmt: skip
            a, b = vs[f"probe_{key}_ms"], vs[f"curl_{key}_ms"]
            lines.append(f"| {label} | {a['p50']:.3f} / {a['p99']:.3f} | {b['p50']:.3f} / {b['p99']:.3f} |")
    return lines


def _collector_section(c: Mapping[str, Any]) -> list[str]:
    parse, proc = c["parse"], c["collector"]
    return [
        f"- Page: {parse['page_lines']} lines, {parse['page_bytes']:,} bytes (the simulator's, vLLM V1's "
        f"names and buckets); lanewatch parses the {parse['lines_parsed']} lines it reads.",
        f"- Parse (`collector/collect/scrape.py` `parse_metrics`): p50 {parse['parse_ms']['p50']} ms, "
        f"p99 {parse['parse_ms']['p99']} ms; fetch + parse over loopback (`scrape_once`): "
        f"p50 {parse['fetch_parse_ms']['p50']} ms.",
        f"- `lanewatch collect` at {proc['probes_per_s']} probes/s over {proc['targets']} targets "
        f"({proc['simulators']} simulator processes), each scraped once a second, spans joined "
        f"{proc['spans_joined_per_s']}/s, over {proc['window_s']} s: CPU {proc['cpu_percent']} % of one core "
        f"({proc['cpu_ms_per_probe']} ms per probe, scrapes included), RSS {proc['rss_mb']} MB at the end, "
        f"{proc['rss_max_in_window_mb']} MB at most in the window, peak {proc['rss_peak_mb']} MB; "
        f"{proc['targets_up']:.0f} targets up, {proc['probe_errors']:.0f} probe errors.",
    ]


def _degrade_section(d: Mapping[str, Any]) -> list[str]:
    def row(key: str, label: str, scale: float = 1.0, unit: str = "s") -> str:
        v = d[key]
        return (
            f"| {label} | {v['p50'] * scale:.3f} | {v['min'] * scale:.3f} | {v['max'] * scale:.3f} | {unit} |"
        )

    return [
        f"{d['trials']} trials; Alertmanager route `group_wait: {d['group_wait']}`, "
        f"`group_interval: {d['group_interval']}` (deploy/alertmanager/alertmanager.yml's degrade route); "
        f"controller `--min-hold-s {d['min_hold_s']} --recovery-stable-s {d['recovery_stable_s']} "
        f"--tick-s {d['tick_s']}`.",
        "",
        "| step | p50 | min | max | unit |",
        "|---|---|---|---|---|",
        row("alert_to_degrade_s", "alert posted → gateway's GET /admin/degrade shows the shift"),
        row(
            "alertmanager_s", "alert posted → the controller has taken the webhook (group_wait is most of it)"
        ),
        row("controller_to_gateway_s", "controller took it → gateway shows the shift", 1e3, "ms"),
        row("resolve_to_restore_s", "resolved posted → lane restored (group_interval + recovery_stable_s)"),
    ]


def _routers_section(d: Mapping[str, Any]) -> list[str]:
    out = [
        f"{d['trials']} shifts and as many restores per router (bench/router_apply.py): the router's "
        "own adapter applies a 100 % shift of the slow lane, as the degrade controller does, while one "
        "client sends a request routed to the slow lane every few ms, one at a time. `apply` is the "
        "adapter's call (its write and its confirmation); `served` runs from the apply's start to the "
        f"first answer from the lane the new state names.{_measured(d)}",
        "",
        "| router | shift: apply p50 / max | shift: served p50 / max | restore: apply p50 / max "
        "| restore: served p50 / max |",
        "|---|---|---|---|---|",
    ]
    for kind, rows in d["routers"].items():
        if "skipped" in rows:
            out.append(f"| {kind} | not run: {rows['skipped']} | | | |")
            continue
        cells = [
            f"{rows[k]['p50'] * 1e3:.1f} / {rows[k]['max'] * 1e3:.1f} ms"
            for k in ("shift_apply", "shift_served", "restore_apply", "restore_served")
        ]
        out.append(f"| {kind} | {' | '.join(cells)} |")
    return out


_SCENARIO_LABELS = {
    "guard": "fast guard, through the gateway",
    "envoy": "fast guard, behind Envoy (its periodic access log)",
    "litellm": "fast guard, behind LiteLLM (its handler's progress reports)",
    "probes-1s": "fast guard on probes alone (as behind nginx), probes every 1 s",
    "probes-0.5s": "fast guard on probes alone (as behind nginx), probes every 0.5 s",
    "rules": "the mitigation rules alone (guard off)",
}


def _fast_loop_section(d: Mapping[str, Any]) -> list[str]:
    def cell(values: list[float]) -> str:
        if not values:
            return "—"
        return f"{statistics.median(values):.2f} ({', '.join(f'{v:.2f}' for v in values)})"

    out = [
        f"Each fault: the simulator's {d['fault']['queue_delay_s']} s queue delay on the slow lane (its TTFT "
        "SLO is 2 s) until a shifted request is seen, then cleared; the production rule file and "
        "Alertmanager timers, the controller acting on mitigation alerts only (bench/fast_loop.py, "
        f"tests/e2e/fault_trials.py).{_measured(d)}",
        "",
        "| scenario | traffic | fault → first shifted request, median (each) | fault → controller's `fired` "
        "| fault's end → restore (hold " + f"{d['hold_s']:.0f} s) | collector CPU | fired by |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in d["scenarios"].items():
        label = _SCENARIO_LABELS.get(name, name)
        if "skipped" in s:
            out.append(f"| {label} | not run: {s['skipped']} | | | | | |")
            continue
        traffic = f"{s['rate_per_s']:g} req/s" if s["rate_per_s"] else "none"
        traffic += f", probes every {s['probe_interval_s']:g} s"
        restore = f"{min(s['to_restore_s']):.1f}–{max(s['to_restore_s']):.1f} s" if s["to_restore_s"] else "—"
        out.append(
            f"| {label} | {traffic} | {cell(s['to_shift_s'])} | {cell(s['to_fired_s'])} | {restore} "
            f"| {s['collector_cpu_percent']:.1f} % of a core | {', '.join(s['fired_by']) or '—'} |"
        )
    return out


def _measured(d: Mapping[str, Any]) -> str:
    """When a part ran and under what load, where it recorded that (a part merged into a stored run)."""
    if "date" not in d:
        return ""
    return (
        f" Measured {d['date']} ({d['duration_s']} s), load average (1, 5, 15 min) "
        f"{d['load_avg_start']} at its start and {d['load_avg_end']} at its end."
    )


def _diagnose_section(r: Mapping[str, Any]) -> list[str]:
    return [
        f"- `lanewatch diagnose FILE --json` on {r['records']:,} records ({r['file_mb']} MB, "
        f"{r['gaps']:,} ITL gaps, two lanes): **{r['cpu_s']} CPU s** ({r['wall_s']} s wall), the "
        f"interpreter's start included, at most {r['rss_mb']} MB resident; top finding `{r['top']}`.",
        f"- Its parts: the CLI's start and a 100-record file {r['start_cpu_s']} s (a process of its "
        f"own); in one process, decoding the file's records alone {r['decode_cpu_s']} s, the streamed "
        f"summary {r['summarise_cpu_s']} s (decoding included, and the second read of the stalling "
        f"records), the checks {r['checks_cpu_s']} s.{_load(r)}",
    ]


def _diagnose_prometheus_section(r: Mapping[str, Any]) -> list[str]:
    return [
        f"- `lanewatch diagnose --prometheus URL --lane fast --lane slow --window {r['window']} --json` "
        f"against a real Prometheus holding 12 minutes of backfilled data ({r['series']:,} series): "
        f"**{r['cpu_s']} CPU s** (lanewatch {r['lanewatch_cpu_s']} s, the interpreter's start included; "
        f"Prometheus {r['prometheus_cpu_s']} s), {r['wall_s']} s wall; top finding `{r['top']}`.{_load(r)}",
    ]


def _load(r: Mapping[str, Any]) -> str:
    """The load average a part was measured under, when it recorded one."""
    load = r.get("load_avg")
    return f" Load average (1, 5, 15 min) as it ran: {load}." if load else ""


def render(results: Mapping[str, Any], notes: Mapping[str, Any] | None = None) -> str:
    """results.md from the results dict (`notes`: the analysis texts, default bench/notes.py's)."""
    if notes is None:
        from .notes import NOTES

        notes = NOTES
    why: Mapping[str, tuple[str, str]] = notes.get("why", {})
    fields = _Fields({**results, **results.get("sizes", {})})
    m = results["machine"]
    tools = ", ".join(f"{k} {v}" for k, v in results.get("tools", {}).items())
    out = [
        "# lanewatch benchmarks",
        "",
        "Generated by `make bench` (`python -m bench`): every figure below comes from one run, side by side; "
        "do not edit by hand.",
        "",
        f"- Date: {results['date']}; run took {results['duration_s']} s.",
        f"- Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB, Linux {m['kernel']}, "
        f"Python {m['python']}; {tools} (Debian's).",
        f"- Load average (1, 5, 15 min) at the start {results['load_avg_start']}, at the end "
        f"{results['load_avg_end']}: the machine is shared, and client, upstream and proxy share its cores "
        "(but in the pinned level).",
        "",
        "## Goals",
        "",
        *_goals_table(results, why, fields),
        "",
    ]
    details = results.get("details", {})
    if "tap" in details:
        out += [
            "## Gateway tap overhead",
            "",
            notes.get("tap_method", "").format_map(fields),
            "",
            *_tap_table(details["tap"]),
            "",
            *_ratios(results, details["tap"]),
            "",
            *_unavailable(details.get("tap_unavailable", {})),
        ]
    if "probe" in details:
        out += [
            "## Prober accuracy",
            "",
            notes.get("probe_method", ""),
            "",
            *_probe_section(details["probe"]),
            "",
        ]
    if "collector" in details:
        out += ["## Collector cost", "", *_collector_section(details["collector"]), ""]
    out += scale_sections(details, notes, fields)
    if "degrade" in details:
        out += ["## Alert to degrade", "", *_degrade_section(details["degrade"]), ""]
    if "routers" in details:
        out += ["## A degrade applied, router by router", "", *_routers_section(details["routers"]), ""]
    if "fastloop" in details:
        out += ["## The fast loop beside the rules", "", *_fast_loop_section(details["fastloop"]), ""]
    if "diagnose" in details:
        out += ["## Diagnosis", "", *_diagnose_section(details["diagnose"]), ""]
    if "diagnoseprom" in details:
        if "diagnose" not in details:
            out += ["## Diagnosis", ""]
        out += [*_diagnose_prometheus_section(details["diagnoseprom"]), ""]
    if "litellm" in details:
        out += [
            "## LiteLLM with lanewatch's handler",
            "",
            *_litellm_section(details["litellm"], notes.get("litellm_method", "").format_map(fields)),
        ]
    if "envoycost" in details:
        out += [
            "## Envoy with lanewatch's access log and tracing",
            "",
            *_envoy_cost_section(details["envoycost"], notes.get("envoy_cost_method", "").format_map(fields)),
        ]
    if notes.get("limits"):
        out += ["## What limits the figures", "", notes["limits"].format_map(fields), ""]
    return "\n".join(out)
