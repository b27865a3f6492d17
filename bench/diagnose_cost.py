"""`lanewatch diagnose` on a large records file: what one diagnosis costs.

The file holds two lanes, half the records each, like the demo's: three request classes (16, 64
and 256 output tokens, every gap recorded), server phases joined; the slow lane is queue-bound,
stalls now and then and sheds 1 in 40 requests, so every check has work to do. The command runs
as users run it (a subprocess, `--json`); the figure is its user + system CPU seconds, from start
to exit (the interpreter's start and imports included), and its peak RSS. In-process timings split
the work: the CLI's start on a 100-record file, decoding the file's records alone, the streamed
summary (decoding included, and the second read of the stalling records), running the checks.

Run alone: `python -m bench.diagnose_cost [--records 100000]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from lanewatch.collector.diagnose import Window, diagnose, top_findings
from lanewatch.collector.diagnose.records import lanes_from_keyed
from lanewatch.collector.record.files import keyed_records, record_line, records_at
from tests.unit.collector.diagnose.build import Shape, records

SLOW = Shape(queue=2.5, stall_s=0.3, stall_every=7, long_prompt_every=5, error_every=40)
COMMAND = [sys.executable, "-c", "from lanewatch.collector.cli import main; main()"]


def write_file(path: Path, n: int) -> None:
    """n records, half per lane."""
    rows = records(SLOW, n=n // 2, lane="slow") + records(Shape(), n=n - n // 2, lane="fast")
    path.write_text("".join(record_line(r) for r in rows), encoding="utf-8")


def _cli(path: Path) -> tuple[dict[str, Any], float, float, float]:
    """`lanewatch diagnose PATH --json` in a process of its own: its document, CPU s, wall s, peak RSS MB."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        wall0 = time.monotonic()
        proc = subprocess.Popen([*COMMAND, "diagnose", str(path), "--json"], stdout=out, stderr=err)
        timer = threading.Timer(600, proc.kill)
        timer.start()
        try:
            # wait4: this child's own usage (RUSAGE_CHILDREN's peak RSS is the largest child's ever)
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.monotonic() - wall0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"lanewatch diagnose exited {proc.returncode}: {err.read()[-2000:]!r}")
        doc = json.loads(out.read())
    return doc, usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024


def run_diagnose_cost(n: int, tmp: Path) -> dict[str, Any]:
    """Time `lanewatch diagnose FILE --json` on n records, and its parts in this process."""
    tmp.mkdir(parents=True, exist_ok=True)
    path, small = tmp / "records.jsonl", tmp / "small.jsonl"
    write_file(path, n)
    write_file(small, 100)
    load = [round(x, 2) for x in os.getloadavg()]  # the machine may be shared: say how busy it was
    doc, cpu, wall, rss_mb = _cli(path)
    _, start_cpu, _, _ = _cli(small)
    t0 = time.process_time()
    gaps = sum(len(r.itl_s) for _, r in keyed_records(path))
    t1 = time.process_time()
    lanes = lanes_from_keyed(keyed_records(path), lambda keys: records_at(path, keys))
    t2 = time.process_time()
    found = top_findings(diagnose(Window(lanes, (("fast", "slow"),))))
    t3 = time.process_time()
    return {
        "records": n,
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "gaps": gaps,
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "rss_mb": round(rss_mb, 1),
        "start_cpu_s": round(start_cpu, 2),
        "decode_cpu_s": round(t1 - t0, 2),
        "summarise_cpu_s": round(t2 - t1, 2),
        "checks_cpu_s": round(t3 - t2, 4),
        "found": doc["found"],
        "top": found[0].check if found else None,
        "load_avg": load,
    }


def flat_keys(r: dict[str, Any]) -> dict[str, float | None]:
    """The results.json keys of this part."""
    per_cpu_s = round(r["records"] / r["cpu_s"]) if r["cpu_s"] > 0 else None
    return {
        "diagnose_records_cpu_s": r["cpu_s"],
        "diagnose_records": r["records"],
        "diagnose_records_per_cpu_s": per_cpu_s,
    }


def main() -> None:
    """Run this part alone and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lanewatch-bench-") as d:
        r = run_diagnose_cost(args.records, Path(d))
    print(json.dumps({"results": r, "keys": flat_keys(r)}, indent=2))


if __name__ == "__main__":
    main()
