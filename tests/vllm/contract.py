"""The vLLM contract as data: `vllm:` metric families, the names lanewatch reads, span attributes.

Pure functions over exposition text and span dumps, shared by the unit tests (which check the
simulator against the committed fixtures of a real vLLM) and the `vllm` tests (which check both
against a live server). Families are compared through prometheus_client's parser: counters are
exposed as `vllm:x_total` but parse into family `vllm:x` of type counter.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lanewatch.collector.collect import scrape
from lanewatch.exporters import names

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
PREFIX = "vllm:"
# Generated files whose PromQL reads vLLM series (rules, dashboards, deploy copies).
GENERATED_GLOBS = ("alerts/generated/*", "dashboards/generated/*.json", "deploy/**/*.y*ml")
_VLLM_NAME = re.compile(r"vllm:[a-z_:]+")
_HIST_SUFFIXES = ("_bucket", "_sum", "_count")
# Families real vLLM exposes only with a feature the contract server does not turn on.
FEATURE_FAMILIES = {
    "vllm:spec_decode_num_drafts": "speculative decoding (a draft model)",
    "vllm:spec_decode_num_draft_tokens": "speculative decoding (a draft model)",
    "vllm:spec_decode_num_accepted_tokens": "speculative decoding (a draft model)",
}
# Speculative decoding's counters as vLLM's source defines them (vllm/v1/spec_decode/metrics.py,
# SpecDecodingProm: names, `labelnames` = the engine labels, plus `position` per draft position).
# No captured page has them (the captures ran without a draft model), so the simulator's, which
# it exposes only with speculative decoding on, are checked against this list instead; like
# every counter on the captured pages, each comes with prometheus_client's `_created` gauge.
SPEC_DECODE_SOURCE: dict[str, frozenset[str]] = {
    "vllm:spec_decode_num_drafts": frozenset({"model_name", "engine"}),
    "vllm:spec_decode_num_draft_tokens": frozenset({"model_name", "engine"}),
    "vllm:spec_decode_num_accepted_tokens": frozenset({"model_name", "engine"}),
    "vllm:spec_decode_num_accepted_tokens_per_pos": frozenset({"model_name", "engine", "position"}),
}
# What the simulator (which follows the newest vLLM) exposes that an older real page lacks, by
# version; the drift check expects exactly these there. 0.27.0 has no per-request preemption histogram
# (prometheus_client's parser also reads a histogram's `_created` samples as a family of their own).
KNOWN_DRIFT: dict[str, tuple[str, ...]] = {
    "0.27.0": (
        "vllm:request_num_preemptions: not on the real page",
        "vllm:request_num_preemptions_created: not on the real page",
    ),
}


@dataclass(frozen=True)
class Family:
    """One `vllm:` metric family as the text parser sees it."""

    name: str  # family name: no `_total` for counters, no `_bucket` for histograms
    type: str  # counter, gauge, histogram, ...
    label_keys: frozenset[str]  # over all samples, without `le`
    buckets: frozenset[float]  # histogram bucket bounds (with +Inf); empty for other types


def families(text: str) -> dict[str, Family]:
    """The `vllm:` families of an exposition, by family name."""
    out: dict[str, Family] = {}
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith(PREFIX):
            continue
        keys = {k for s in fam.samples for k in s.labels if k != "le"}
        bounds = {float(s.labels["le"]) for s in fam.samples if s.name.endswith("_bucket")}
        out[fam.name] = Family(fam.name, fam.type, frozenset(keys), frozenset(bounds))
    return out


def drift(sim: Mapping[str, Family], real: Mapping[str, Family]) -> list[str]:
    """Everything the simulator exposes that the real page lacks: names, types, label keys, bounds."""
    problems: list[str] = []
    for name, fam in sorted(sim.items()):
        other = real.get(name)
        if other is None:
            problems.append(f"{name}: not on the real page")
            continue
        if fam.type != other.type:
            problems.append(f"{name}: type {fam.type} here, {other.type} on the real page")
        if extra := sorted(fam.label_keys - other.label_keys):
            problems.append(f"{name}: label keys {extra} not on the real page")
        if extra_bounds := sorted(fam.buckets - other.buckets):
            problems.append(f"{name}: bucket bounds {extra_bounds} not on the real page")
    return problems


def family_of(sample_name: str, types: Mapping[str, str]) -> tuple[str, str]:
    """The family a sample name belongs to, and the type its spelling implies (or `types` gives)."""
    if types.get(sample_name) == "histogram":  # vllm:iteration_tokens_total is one
        return sample_name, "histogram"
    if sample_name.endswith("_total"):
        return sample_name.removesuffix("_total"), "counter"
    for suffix in _HIST_SUFFIXES:
        base = sample_name.removesuffix(suffix)
        if base != sample_name and types.get(base) == "histogram":
            return base, "histogram"
    return sample_name, types.get(sample_name, "gauge")


def lanewatch_reads(sim_types: Mapping[str, str]) -> dict[str, str]:
    """Every `vllm:` family lanewatch reads (scrape, names, rules, dashboards) and the type it expects.

    Legacy (pre-V1) names are left out: the scraper accepts them from old servers, no V1 page has them.
    """
    wanted: set[str] = {*scrape.GAUGES, *scrape.COUNTERS, *scrape.PHASE_HISTOGRAMS.values()}
    wanted |= {v for k, v in vars(names).items() if k.startswith("VLLM_") and isinstance(v, str)}
    for pattern in GENERATED_GLOBS:
        for path in ROOT.glob(pattern):
            if path.is_file():
                wanted |= set(_VLLM_NAME.findall(path.read_text(errors="replace")))
    legacy = {*names.VLLM_LEGACY_ALIASES, names.VLLM_LEGACY_SPEC_DECODE_DRAFT_ACCEPTANCE_RATE}
    out: dict[str, str] = {}
    for sample in sorted(wanted - legacy):
        base, kind = family_of(sample, sim_types)
        if base not in legacy:
            out[base] = kind
    return out


def missing_reads(reads: Mapping[str, str], real: Mapping[str, Family]) -> list[str]:
    """The families lanewatch reads that the real page lacks, has with another type, or without our labels."""
    problems: list[str] = []
    for name, kind in sorted(reads.items()):
        if name in FEATURE_FAMILIES:
            continue
        fam = real.get(name)
        if fam is None:
            problems.append(f"{name}: read by lanewatch, not on the real page")
        elif fam.type != kind:
            problems.append(f"{name}: read as {kind}, a {fam.type} on the real page")
        elif name.endswith("_info"):
            continue  # an info gauge is per engine (cache_config_info has no model_name)
        elif missing := sorted(set(names.VLLM_LABELS) - fam.label_keys):
            problems.append(f"{name}: lacks label keys {missing}")
    return problems


def spec_decode_families() -> dict[str, Family]:
    """SPEC_DECODE_SOURCE as parsed families: each counter and its `_created` gauge."""
    out: dict[str, Family] = {}
    for name, keys in SPEC_DECODE_SOURCE.items():
        out[name] = Family(name, "counter", keys, frozenset())
        out[name + "_created"] = Family(name + "_created", "gauge", keys, frozenset())
    return out


def simulator_exposition(max_model_len: int, model: str = "tiny", spec_tokens: int | None = None) -> str:
    """The simulator's whole /metrics page, serving `model` with the real server's max-model-len
    (with speculative decoding of `spec_tokens` draft tokens when given)."""
    from lanewatch.simulator import FAST
    from lanewatch.simulator.app import SimConfig, Simulator
    from lanewatch.simulator.specdecode import SpecDecodeConfig

    profile = dataclasses.replace(FAST, max_model_len=max_model_len)
    spec = SpecDecodeConfig(spec_tokens, 0.5) if spec_tokens else None
    sim = Simulator(SimConfig(profile=profile, model=model, spec=spec))
    return generate_latest(sim.registry).decode()


# ---------------------------------------------------------------- spans


def attribute_kinds(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Attribute name → value kind (`double`, `int`, `string`, `bool`)."""
    kinds = {bool: "bool", int: "int", float: "double", str: "string"}
    return {k: kinds.get(type(v), type(v).__name__) for k, v in attrs.items()}


def span_dump_entry(span: Any, parent_header: str | None = None) -> dict[str, Any]:
    """One OTLP protobuf span as a JSON-able dict: ids in hex, attributes with their kinds."""
    attrs: dict[str, Any] = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        attrs[kv.key] = getattr(kv.value, which) if which else None
    return {
        "name": span.name,
        "kind": int(span.kind),
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "duration_s": (span.end_time_unix_nano - span.start_time_unix_nano) / 1e9,
        "attributes": attrs,
        "attribute_kinds": attribute_kinds(attrs),
        **({"traceparent": parent_header} if parent_header else {}),
    }


def decode_spans(bodies: Iterable[bytes]) -> list[dict[str, Any]]:
    """Every span in OTLP/HTTP protobuf export bodies, as `span_dump_entry` dicts."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out: list[dict[str, Any]] = []
    for body in bodies:
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                out.extend(span_dump_entry(s) for s in ss.spans)
    return out


def load_fixture(version: str) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    """A captured real vLLM: its /metrics page, its span dump and how it was served."""
    folder = FIXTURES / f"vllm-{version}"
    page = (folder / "metrics.txt").read_text()
    spans = json.loads((folder / "spans.json").read_text())
    server = json.loads((folder / "server.json").read_text())
    return page, spans, server
