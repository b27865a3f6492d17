"""What serves each demo lane: the embedded simulator, or a real `vllm serve` from a cached venv.

Pure: `find_vllm` checks a folder made by `make vllm` (a venv with the CPU build and two
random-weight models), `vllm_command` builds a lane's command line and environment. The demo
runs vLLM as a child process; nothing here imports vllm.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final, Literal

from lanewatch.collector.common.errors import StartupError
from lanewatch.collector.probe.settings import RequestClass

from .burst import BurstSpec
from .configs import DEMO_VLLM_RULES, DEMO_VLLM_SPEC
from .timeline import Plan

__all__ = [
    "CPU_ARGS",
    "CPU_ENV",
    "DEMO_ENV",
    "ENGINES",
    "SIM_SIZING",
    "VLLM_CLASSES",
    "VLLM_MODELS",
    "VLLM_SIZING",
    "VLLM_VERSION",
    "EngineMissing",
    "Sizing",
    "VllmInstall",
    "default_vllm_root",
    "find_vllm",
    "vllm_cache",
    "vllm_command",
]

Engine = Literal["sim", "vllm"]
ENGINES: Final = ("sim", "vllm")
VLLM_VERSION: Final = "0.32.0"
# Each lane's model folder under <root>/models: the fast lane a 5 M-parameter Llama, the slow
# lane a 111 M one (both random weights, made offline by `make vllm`).
VLLM_MODELS: Final = {"fast": "tiny", "slow": "small"}
# Long enough for the demo's longest prompt (the slow-lane burst, ~1,900 tokens) plus its answer.
MAX_MODEL_LEN: Final = 4096
# What the CPU build needs: a 1 GiB KV cache, no thread pinning (the machine is shared), no hub,
# no usage report. The platform comes from the `+cpu` version or VLLM_TARGET_DEVICE.
CPU_ENV: Final = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    # lanewatch's OTLP receiver speaks OTLP/HTTP; vLLM's default exporter is gRPC.
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
}
# float32, not bfloat16: on cores without AVX-512 BF16 the CPU build emulates bfloat16, ~5x slower
# (12 requests sharing a 250-word prefix on the small model: 21 s against 4.2 s, measured on 2 AVX2
# cores). `-O 0` skips torch.compile: a start of ~48 s instead of ~105 s, at a small cost per step.
CPU_ARGS: Final = ("--dtype", "float32", "-O", "0")
# The demo runs two engines on a machine it assumes small: one OpenMP thread each. Two threads each
# on 2 cores spin against one another (a 6-token request on the fast lane: p50 2.1 s against 0.07 s
# while the slow lane served a burst, measured).
DEMO_ENV: Final = {**CPU_ENV, "OMP_NUM_THREADS": "1"}


# The request classes (probe and traffic) on real engines: the default classes' 1,500-word prompt
# is ~4,500 tokens with these models' tokenizer, past their 4,096 positions, and a 256-token
# answer keeps a crowded CPU busy for minutes. Same names and roles, smaller: short answers (up to
# VLLM_SIZING's 8 tokens) go to the fast lane, the rest to the slow one.
VLLM_CLASSES: Final = (
    RequestClass(name="short", description="a short question", prompt_words=12, max_tokens=6),
    RequestClass(name="summary", description="summarize a long input", prompt_words=100, max_tokens=12),
    RequestClass(name="story", description="write a long answer", prompt_words=24, max_tokens=32),
)


@dataclass(frozen=True)
class Sizing:
    """What the demo asks of its engines: SLO rules, load, request classes, the fault."""

    slo_spec: Path | None  # None: the demo's SLOs (alerts/slos-demo.yaml)
    rate_per_s: float  # requests per second through the gateway
    probe_interval_s: float  # each lane x class probed this often
    probe_timeouts: Mapping[str, float]  # the probe's per-phase limits (ttft_s, stall_s, total_s)
    classes: tuple[RequestClass, ...] | None = None  # None: the probe's default classes
    fast_max_tokens: int = 32  # the gateway routes requests asking up to this many tokens fast
    burst: BurstSpec | None = None  # None: the simulator's scripted fault
    max_fault_s: float = 90.0  # the fault clears by then even without a shift
    request_timeout_s: float = 120.0  # the traffic gives a request up after this
    # Open requests get this long to finish at the end (no client disconnects in the records);
    # on the simulator the longest (256 tokens on the slow lane, faulted) takes ~12 s.
    drain_s: float = 20.0
    duration_s: float = 240.0  # the demo's default limit, once up
    rules: Path | None = None  # slo_spec's committed rule file (alerts/generated/); None: the demo's

    def plan(self, plan: Plan) -> Plan:
        """`plan` with this engine's fault and fault deadline."""
        if self.burst is None:
            return plan
        return replace(plan, fault=self.burst.to_json(), max_fault_s=max(plan.max_fault_s, self.max_fault_s))


SIM_SIZING: Final = Sizing(None, rate_per_s=4.0, probe_interval_s=2.0, probe_timeouts={"ttft_s": 20.0})
# Real engines: a request every two seconds is what two CPU engines serve beside each other on
# 2 shared cores; short answers keep each request's CPU time small. The fault: long prompts
# (~1,500 tokens each) straight to the slow lane, as many at once as queue 5 of its TTFT SLOs
# (burst.py times one first): 5 on one AVX2 core in float32, where the small model prefills ~200
# tokens/s, and more on a faster machine, where 4 at once left most requests within the SLO. The
# queue has a ceiling too: twelve at once queued ~100 s on the slow core, and nothing behind them
# finished before the fault cleared, so nothing was recorded to page on.
VLLM_SIZING: Final = Sizing(
    DEMO_VLLM_SPEC,
    rules=DEMO_VLLM_RULES,
    rate_per_s=0.5,
    probe_interval_s=5.0,
    # A request queued behind the burst waits for its first token, and a decode step shares the
    # engine with the burst's prefill chunks: neither is an outage here.
    probe_timeouts={"ttft_s": 240.0, "stall_s": 120.0, "total_s": 400.0},
    request_timeout_s=600.0,
    drain_s=120.0,
    duration_s=900.0,
    classes=VLLM_CLASSES,
    fast_max_tokens=8,
    # A queue of 5 TTFT SLOs: a request arriving at a random moment of it meets the SLO 1 time in 5 or
    # less, so the lane's goodput falls well under half while the burst lasts, on any machine's speed.
    burst=BurstSpec(concurrency=16, prompt_words=250, max_tokens=4, queue_slos=5.0),
    max_fault_s=180.0,
)


class EngineMissing(StartupError, RuntimeError):
    """The vLLM install the demo was pointed at is not usable; the message is one line."""


@dataclass(frozen=True)
class VllmInstall:
    """A folder made by `make vllm`: venv/bin/vllm and models/<name>/."""

    root: Path

    @property
    def vllm(self) -> Path:
        """The `vllm` command."""
        return self.root / "venv" / "bin" / "vllm"

    def model(self, lane: str) -> Path:
        """The model folder a lane serves."""
        return self.root / "models" / VLLM_MODELS[lane]


def vllm_cache(env: Mapping[str, str] | None = None) -> Path:
    """Where `make vllm` keeps its venvs and models: $LANEWATCH_CACHE, else ~/.cache/lanewatch."""
    env = os.environ if env is None else env
    return Path(env.get("LANEWATCH_CACHE") or Path.home() / ".cache" / "lanewatch")


def default_vllm_root(env: Mapping[str, str] | None = None) -> Path:
    """Where `make vllm` puts vLLM 0.32.0: <vllm_cache>/vllm-0.32.0."""
    return vllm_cache(env) / f"vllm-{VLLM_VERSION}"


def find_vllm(root: Path, lanes: tuple[str, ...]) -> VllmInstall:
    """The install at `root` if it has the vllm command and the models `lanes` need."""
    inst = VllmInstall(root)
    needed = [inst.vllm, *(inst.model(lane) / "config.json" for lane in lanes)]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise EngineMissing(
            f"no usable vLLM in {root} ({missing[0]} is missing): run `make vllm`, "
            "or point --vllm-root at a folder it made"
        )
    return inst


def vllm_command(
    inst: VllmInstall, lane: str, port: int, served_name: str, traces_url: str
) -> tuple[list[str], dict[str, str]]:
    """`vllm serve` of a lane's model on 127.0.0.1:port under `served_name`, spans to `traces_url`."""
    argv = [
        str(inst.vllm), "serve", str(inst.model(lane)), "--served-model-name", served_name,
        "--host", "127.0.0.1", "--port", str(port), *CPU_ARGS,
        "--max-model-len", str(MAX_MODEL_LEN), "--otlp-traces-endpoint", traces_url,
    ]  # fmt: skip
    return argv, dict(DEMO_ENV)
