"""`lanewatch demo`: the whole loop on one machine: fault, alert, degrade, recovery, restore."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .app import app

if TYPE_CHECKING:
    from rich.console import Console

    from lanewatch.collector.demo import DemoResult


@app.command("demo", short_help="Run the whole loop on 127.0.0.1 with a scripted fault.")
def demo(
    duration: float | None = typer.Option(
        None,
        "--duration",
        min=30.0,
        help="Seconds the demo runs at most, once up; it ends sooner, 15 s after the traffic is back "
        "[default: 240 on sim, 900 on vllm].",
        show_default=False,
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Write records.jsonl, summary.json, report.html and the parts' logs here."
    ),
    live: bool | None = typer.Option(
        None,
        "--live/--no-live",
        help="A live terminal view, or plain lines as events happen (default: live on a terminal).",
        show_default=False,
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for the simulators, the traffic and the gateway."),
    rate: float | None = typer.Option(
        None,
        "--rate",
        min=0.1,
        max=50.0,
        help="Requests per second through the gateway (Poisson) [default: 4 on sim, 0.5 on vllm].",
        show_default=False,
    ),
    warmup: float = typer.Option(
        20.0, "--warmup", min=5.0, help="Seconds of healthy traffic before the fault."
    ),
    engine: str = typer.Option(
        "sim",
        "--engine",
        help="What serves the lanes: sim (the embedded simulator, a scripted fault) or vllm "
        "(real `vllm serve` from `make vllm`; the fault is a burst of long prompts).",
    ),
    vllm_root: Path | None = typer.Option(
        None,
        "--vllm-root",
        help="With --engine vllm: the folder `make vllm` made (venv/, models/tiny, models/small) "
        "[default: $LANEWATCH_CACHE or ~/.cache/lanewatch, then vllm-0.32.0].",
        show_default=False,
    ),
    router: str = typer.Option(
        "gateway",
        "--router",
        help="What the traffic goes through: gateway (lanewatch gateway, its tap), envoy (a real "
        "Envoy whose route file the controller's envoy adapter writes; records from its access log) or "
        "litellm (a real LiteLLM proxy from `make litellm` with lanewatch's handler, which the "
        "controller's litellm adapter drives; records from the handler).",
    ),
    fast_on_sim: bool = typer.Option(
        False,
        "--fast-lane-sim",
        help="With --engine vllm: serve only the slow lane with vLLM and the fast one with the "
        "simulator (one engine's CPU instead of two).",
    ),
) -> None:
    """Run lanewatch end to end on 127.0.0.1 and watch an SLO breach get handled.

    Starts two vLLM lanes (fast and slow; simulated over HTTPS, or with --engine vllm real
    `vllm serve` processes of a tiny and a larger random-weight model), the gateway, the
    collector, the degrade controller, and real Prometheus and Alertmanager (Debian's
    prometheus, prometheus-alertmanager). Mixed traffic flows through the gateway; after the
    warm-up the slow lane slows down (the simulator's fault API, or on vLLM a burst of
    long-prompt requests that fills its queue): the TTFT burn alert fires, the controller
    shifts the slow lane's traffic to the fast lane, the fault clears, the alert resolves
    and the traffic returns. Ctrl-C stops everything and still writes what the run saw.
    """
    import asyncio
    import signal

    from rich.console import Console

    from lanewatch.collector.demo import Options, Plan, run_demo
    from lanewatch.collector.demo.engines import ENGINES, SIM_SIZING, VLLM_SIZING
    from lanewatch.collector.demo.run import ROUTERS

    console = Console(highlight=False)
    if live is None:
        live = console.is_terminal
    console.soft_wrap = not live  # plain lines stay whole in logs
    if out is not None and out.exists() and not out.is_dir():
        typer.echo(f"--out {out}: not a directory", err=True)
        raise typer.Exit(2)
    if engine not in ENGINES:
        typer.echo(f"--engine {engine}: expected one of {', '.join(ENGINES)}", err=True)
        raise typer.Exit(2)
    if engine != "vllm" and (vllm_root is not None or fast_on_sim):
        typer.echo("--vllm-root and --fast-lane-sim need --engine vllm", err=True)
        raise typer.Exit(2)
    if router not in ROUTERS:
        typer.echo(f"--router {router}: expected one of {', '.join(ROUTERS)}", err=True)
        raise typer.Exit(2)
    if router != "gateway" and engine != "sim":
        typer.echo(f"--router {router} runs with --engine sim only", err=True)
        raise typer.Exit(2)
    sizing = VLLM_SIZING if engine == "vllm" else SIM_SIZING
    opts = Options(
        sizing.plan(Plan(duration_s=duration or sizing.duration_s, warmup_s=warmup)),
        out=out,
        live=live,
        seed=seed,
        rate_per_s=rate if rate is not None else sizing.rate_per_s,
        probe_interval_s=sizing.probe_interval_s,
        engine=engine,
        vllm_root=vllm_root,
        fast_on_sim=fast_on_sim,
        router=router,
    )

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        result = await run_demo(opts, console, stop)
        _report(console, result)
        return 1 if result.error else 130 if result.interrupted else 0

    raise typer.Exit(asyncio.run(main()))


def _report(console: Console, result: DemoResult) -> None:
    """The run's outcome: errors, the loop's measured delays, the files written."""
    if result.error:
        console.print(f"lanewatch demo: {result.error}", style="bold red", highlight=False)
    if result.interrupted:
        console.print("interrupted: every part stopped; writing what the run saw", style="yellow")
    names = {
        "fault_to_alert_s": "fault → alert",
        "alert_to_degrade_s": "alert → degrade",
        "clear_to_resolve_s": "fault cleared → alert resolved",
        "resolve_to_restore_s": "resolved → restored",
    }
    timings = [f"{label} {v:.1f} s" for k, label in names.items() if (v := result.timings.get(k)) is not None]
    if timings:
        console.print("the loop: " + "; ".join(timings), highlight=False)
    for path in result.outputs:
        console.print(f"wrote {path}", highlight=False)
