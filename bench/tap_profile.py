"""Where the tap's CPU goes at N streams: py-spy on the gateway under the tap bench's load.

The same upstream, records sink and closed-loop client as the tap bench (bench/tap_overhead.py),
N streams, one gateway process; py-spy samples the gateway (`--native` optional) for a few
seconds in the middle of the load. The summary groups the samples by where the time is spent:
each leaf frame's share (self), and the share of samples a frame of each group stands in
(inclusive), with the CPU per 1,000 chunks measured over the same seconds.

Run alone: `python -m bench.tap_profile [--streams 512] [--seconds 10] [--native]` (py-spy on
PATH or beside this interpreter: `pip install py-spy`; it needs ptrace on the gateway).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .machine import cpu_s
from .stream_client import close_all, open_connections, run_load
from .tap_overhead import CHUNKS, STREAM_S, _paths

__all__ = ["GROUPS", "group_of", "run_profile", "summarize"]

# (group, substrings of a leaf frame "function (file)" that put it there), first match wins. Without
# --native a C call (a socket write, the loop's epoll) shows as the Python frame that made it.
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("writing to the client (a transport.write a chunk)", ("FrontConn._write", "FrontConn.send")),
    ("the upstream body's chunked framing", ("BodyParser",)),
    ("the tap's scan (SSE events, tokens, ITL)", ("tap/stream_scan.py", "tap/content_tap.py")),
    ("the record: built, encoded, shipped", ("record", "ship", "json/", "__create_fn__")),
    (
        "the request: head, route, send upstream",
        ("http1/", "front/connection.py", "forward.py"),
    ),
    ("the event loop (uvloop, in C)", ("Runner.run", "uvloop", "asyncio/")),
    ("the gateway's other code", ("collector/",)),
)


_LINE = re.compile(r":\d+\)$")


def group_of(frame: str) -> str:
    """The group a leaf frame belongs to (by its function and file), `other` when none matches."""
    return next((g for g, keys in GROUPS if any(k in frame for k in keys)), "other")


def summarize(collapsed: Iterable[str], top: int = 15) -> dict[str, Any]:
    """py-spy's raw (collapsed) stacks → each group's and each leaf frame's share of the samples."""
    leaves: Counter[str] = Counter()
    groups: Counter[str] = Counter()
    total = 0
    for line in collapsed:
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        # "function (file:line)" → "function (file)": a function's lines add up
        frames = [_LINE.sub(")", f) for f in stack.split(";") if f and not f.startswith("process ")]
        if not frames:
            continue
        total += n
        leaves[frames[-1]] += n
        groups[group_of(frames[-1])] += n
    if not total:
        return {"samples": 0}

    def share(c: Counter[str], k: int) -> list[tuple[str, float]]:
        return [(name, round(v / total, 3)) for name, v in c.most_common(k)]

    return {
        "samples": total,
        "by_group": share(groups, len(GROUPS) + 1),
        "top_leaves": share(leaves, top),
    }


def _py_spy() -> str:
    here = Path(sys.executable).with_name("py-spy")
    found = str(here) if here.is_file() else shutil.which("py-spy")
    if found is None:
        raise SystemExit("py-spy not found beside this interpreter or on PATH: pip install py-spy")
    return found


def run_profile(
    streams: int, seconds: float, native: bool = False, keep: Path | None = None
) -> dict[str, Any]:
    """Run the tap at `streams` streams and profile the gateway for `seconds`: the summary and CPU
    (`keep`: where to copy py-spy's raw stacks)."""
    spy = _py_spy()
    with (
        tempfile.TemporaryDirectory(prefix="lanewatch-profile-") as d,
        _paths(Path(d), ["tap"]) as (paths, _),
    ):
        tap = paths[0]
        out = Path(d) / "stacks.txt"

        async def main() -> dict[str, Any]:
            conns = await open_connections(tap.port, streams)
            try:
                await run_load(conns, STREAM_S * 3, STREAM_S, CHUNKS)  # warm-up
                pids = tap.pids()
                args = [spy, "record", "--pid", str(pids[0]), "--rate", "250", "--format", "raw"]
                args += ["--duration", str(int(seconds)), "--output", str(out)]
                # py-spy reads C frames only from a stopped process; Python frames alone it can read
                # without stopping it (what the load would otherwise feel)
                args += ["--native"] if native else ["--nonblocking"]
                cpu0 = cpu_s(*pids)
                spy_proc = await asyncio.create_subprocess_exec(
                    *args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
                )
                load = await run_load(conns, seconds + 1.0, STREAM_S, CHUNKS)
                cpu = cpu_s(*pids) - cpu0
                _, err = await asyncio.wait_for(spy_proc.communicate(), timeout=60)
                if spy_proc.returncode != 0:
                    raise RuntimeError(f"py-spy failed: {err.decode(errors='replace')[-500:]}")
                return {
                    "streams": streams,
                    "chunks_per_s": round(load.chunks_per_s),
                    "errors": load.errors,
                    "cpu_s_per_1k_chunks": round(cpu / load.chunks * 1000, 4) if load.chunks else None,
                }
            finally:
                close_all(conns)

        figures = asyncio.run(main())
        if keep is not None:
            shutil.copyfile(out, keep)
        return {**figures, **summarize(out.read_text(errors="replace").splitlines())}


def main() -> None:
    """Profile the tap alone and print the summary as JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--streams", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--native", action="store_true", help="also sample C frames (uvloop, libc)")
    ap.add_argument("--keep", type=Path, help="copy py-spy's raw stacks here")
    args = ap.parse_args()
    print(json.dumps(run_profile(args.streams, args.seconds, args.native, args.keep), indent=1))


if __name__ == "__main__":
    main()
