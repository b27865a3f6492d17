"""results.md's sections for the collector at scale: probe cost, ingest, one collector's fleet. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["scale_sections"]


def _v(value: Any, digits: int = 2) -> str:
    if value is None:
        return "—"
    return (
        f"{value:,.{digits}f}"
        if isinstance(value, float)
        else f"{value:,}"
        if isinstance(value, int)
        else str(value)
    )


def _probe_cost(r: Mapping[str, Any]) -> list[str]:
    lines = [
        "| prober | probes (errors) | window (s) | CPU s | CPU ms per probe (user part) | RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for name, label in (("lanewatch", "`lanewatch collect`"), ("blackbox", "blackbox_exporter")):
        s = r.get(name)
        if s is None:
            lines.append(f"| {label} | not installed | — | — | — | — |")
            continue
        lines.append(
            f"| {label} | {s['probes']} ({s['errors']}) | {s['window_s']} | {s['cpu_s']} | "
            f"{_v(s['cpu_ms_per_probe'], 3)} ({_v(s.get('user_ms_per_probe'), 3)}) | {s['rss_mb']} |"
        )
    return lines


def _ingest(r: Mapping[str, Any]) -> list[str]:
    return [
        f"- {r['records']:,} records in batches of {r['batch_records']} and an OTLP export with spans for "
        f"half of each batch, sent in {r['send_s']} s; the collector counted {r['records_counted']:,} "
        f"records and joined {r['spans_joined']:,} spans, using {r['cpu_s']} CPU s: "
        f"{_v(r['cpu_us_per_record'], 1)} µs per record, "
        f"**{_v(r['records_per_core_s'])} records/s per core**."
    ]


def _fleet(r: Mapping[str, Any]) -> list[str]:
    lines = [
        f"Probe every {r['probe_interval_s']:.0f} s (one class, 16 tokens), scrape every "
        f"{r['scrape_interval_s']:.0f} s, probe concurrency {r['concurrency']}.",
        "",
        "| targets | probes/s (errors) | targets up | CPU (cores) | CPU per target (ms/s) | "
        "waited for a core (s/s) | upstream CPU (cores) | RSS MB (peak) | start delay p50 / p99 (ms) | "
        "/metrics: lines, answer s, CPU s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in r["rows"]:
        per_target = 1e3 * row["cpu_cores"] / row["targets"]
        lines.append(
            f"| {row['targets']:,} | {row['probes_per_s']} ({row['probe_errors']}) | {row['targets_up']} | "
            f"{row['cpu_cores']} | {per_target:.3f} | {_v(row.get('runqueue_wait_s_per_s'))} | "
            f"{_v(row.get('upstream_cpu_cores'))} | {row['rss_mb']} ({row['rss_peak_mb']}) | "
            f"{_v(row['start_delay_p50_ms'])} / {_v(row['start_delay_p99_ms'])} | "
            f"{row['metrics_page_lines']:,}, {row['metrics_answer_s']}, {row['metrics_render_cpu_s']} |"
        )
    return lines


def scale_sections(
    details: Mapping[str, Any], notes: Mapping[str, Any], fields: Mapping[str, Any]
) -> list[str]:
    """The probe cost, ingest and fleet sections, for the parts this run measured."""
    out: list[str] = []
    if "probecost" in details:
        out += [
            "## Probe cost against blackbox_exporter",
            "",
            notes.get("probecost_method", "").format_map(fields),
        ]
        out += ["", *_probe_cost(details["probecost"]), ""]
    if "ingest" in details:
        out += [
            "## Ingest",
            "",
            notes.get("ingest_method", "").format_map(fields),
            "",
            *_ingest(details["ingest"]),
            "",
        ]
    if "fleet" in details:
        out += ["## One collector, many targets", "", notes.get("fleet_method", "").format_map(fields), ""]
        out += [*_fleet(details["fleet"]), ""]
    return out
