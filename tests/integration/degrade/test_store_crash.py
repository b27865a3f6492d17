"""The degrade store under SIGKILL: a writer process killed at random moments loses nothing committed."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lanewatch.collector.degrade.store import DB_FILE, Store
from tests.layout import ROOT
from tests.unit.collector.degrade.test_store import numbered_state

pytestmark = pytest.mark.integration

WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from tests.unit.collector.degrade.test_store import numbered_state
    from lanewatch.collector.degrade.state import AuditEntry
    from lanewatch.collector.degrade.store import Store

    store = Store(Path(sys.argv[1]))
    n = store.load().revision
    print("ready", flush=True)
    while True:
        n += 1
        audit = [AuditEntry(n, "fired", detail={"n": n}), AuditEntry(n, "apply", detail={"n": n})]
        store.commit(numbered_state(n), audit, at=float(n))
    """
)


def test_sigkill_at_random_moments_leaves_one_side_of_a_transition(tmp_path: Path) -> None:
    rng = random.Random(4)
    last = 0
    for _ in range(5):  # bounded: each round is one writer process killed mid-stream
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        store = Store(tmp_path)
        snap = store.load()
        assert snap.state == numbered_state(snap.revision)  # the state is exactly the one committed
        assert store.audit_count() == 2 * snap.revision  # with exactly its audit entries, no more
        assert [e.detail["n"] for _, _, e in store.recent(2)] == [snap.revision] * 2
        assert snap.revision >= last  # nothing committed was lost
        last = snap.revision
        assert sqlite3.connect(tmp_path / DB_FILE).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        store.close()
    assert last > 5  # the writers did commit between kills
