"""A private PostgreSQL cluster on 127.0.0.1 for a test: Debian's server, run as the `postgres` user."""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.missing import missing
from tests.servers import free_port

__all__ = ["Cluster", "cluster", "fresh", "pg"]

USER = "lanewatch"


@dataclass(frozen=True)
class Cluster:
    """Where the cluster listens, and the password file of its `lanewatch` superuser."""

    port: int
    password_file: Path
    folder: Path
    pg_ctl: str = ""
    options: str = ""

    def stop(self) -> None:
        """Stop the server at once, as a crash would (`-m immediate`)."""
        _as_postgres(self.pg_ctl, "-D", str(self.folder / "data"), "-m", "immediate", "stop")

    def start(self) -> None:
        """Start the server again on its port, and wait until it takes connections."""
        data, log = str(self.folder / "data"), str(self.folder / "log")
        _as_postgres(self.pg_ctl, "-D", data, "-o", self.options, "-l", log, "-w", "start")

    @property
    def url(self) -> str:
        """A libpq URL without the password (it is in `password_file`)."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/postgres"

    def password(self) -> str:
        """The superuser's password."""
        return self.password_file.read_text().strip()


def _bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not found:
        missing("PostgreSQL not found: install Debian's postgresql (make tools)")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        missing("no `postgres` user to run PostgreSQL as: install Debian's postgresql (make tools)")
    if os.geteuid() != 0:
        missing("PostgreSQL is started as the `postgres` user, which needs root")
    return Path(found[-1]).parent


def _as_postgres(*args: str) -> None:
    cmd = ["runuser", "-u", "postgres", "--", *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{args[0]} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}"


@contextmanager
def cluster() -> Iterator[Cluster]:
    """A fresh cluster (initdb, then pg_ctl start), stopped and removed after the block."""
    bin_dir = _bin()
    # Not under pytest's tmp_path: its folders are root's alone, and the server runs as postgres.
    folder = Path(tempfile.mkdtemp(prefix="lanewatch-pg-"))
    password = folder / "password"
    password.write_text(secrets.token_hex(16) + "\n")
    shutil.chown(folder, "postgres")
    shutil.chown(password, "postgres")
    os.chmod(password, 0o600)
    data, port = folder / "data", free_port()

    _as_postgres(
        str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "-E", "UTF8", "--no-sync",
        "--auth-host=scram-sha-256", "--auth-local=trust", f"--pwfile={password}",
    )  # fmt: skip
    options = f"-h 127.0.0.1 -p {port} -k {folder} -c fsync=off -c max_connections=50"
    # the tests read the password as root: root's own copy, beside the server's
    secret = Path(tempfile.mkdtemp(prefix="lanewatch-pg-secret-"))
    (secret / "password").write_text(password.read_text())
    os.chmod(secret / "password", 0o600)
    pg_ctl = str(bin_dir / "pg_ctl")
    _as_postgres(pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start")
    try:
        yield Cluster(port, secret / "password", folder, pg_ctl, options)
    finally:
        stop = [pg_ctl, "-D", str(data), "-m", "immediate", "stop"]
        subprocess.run(["runuser", "-u", "postgres", "--", *stop], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(secret, ignore_errors=True)


@pytest.fixture(scope="module")
def pg() -> Iterator[Cluster]:
    """A cluster for the test module."""
    with cluster() as c:
        yield c


@pytest.fixture
def fresh(pg: Cluster) -> Cluster:
    """The module's cluster emptied of lanewatch's tables: each test starts from nothing."""
    from lanewatch.collector.degrade.shared_store import connect

    db = connect(pg.url, pg.password(), 5.0)
    db.execute("DROP SCHEMA public CASCADE")
    db.execute("CREATE SCHEMA public")
    db.close()
    return pg
