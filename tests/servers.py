"""Real servers for tests: `lanewatch sim` as a subprocess on a free 127.0.0.1 port.

    with start_simulator(tmp_path, profile="fast", tls=True) as sim:
        httpx.get(f"{sim.url}/health", verify=sim.ssl_verify)  # trusts sim.cert_path

Extra keyword flags become CLI options: `model="x"` -> `--model x`, `max_num_seqs=4` ->
`--max-num-seqs 4`, `faults={...}` -> `--faults '<json>'`, `True` -> a bare flag, `None` or
`False` -> omitted. An admin token file is made unless `admin_token_file` is given (None turns the
admin API off). The process (and its children) is stopped when the block exits.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from lanewatch.collector.demo.supervisor import free_ports
from tests.waiting import eventually

START_TIMEOUT_S = 20.0
DEFAULT_MODELS = {"fast": "meta-llama/Llama-3.2-1B-Instruct", "slow": "meta-llama/Llama-3.1-70B-Instruct"}


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (below the ephemeral range)."""
    return free_ports(1)[0]


def token_file(folder: Path, name: str = "ingest-token") -> tuple[Path, str]:
    """A fresh bearer token written to `folder/name` (mode 0600): the file and the token."""
    token = secrets.token_hex(16)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return path, token


# Sockets bound and never listening, held until the test run ends (see closed_port).
_HELD_CLOSED: list[socket.socket] = []


def closed_port() -> int:
    """A 127.0.0.1 port that refuses connections for the rest of the run.

    Bound but not listening, and held: a port only released could be taken by another
    process's server meanwhile, or picked as a connecting socket's own source port, and a
    connect to it would then succeed (TCP self-connect) instead of being refused.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    _HELD_CLOSED.append(s)
    return int(s.getsockname()[1])


def wait_listening(url: str, after_s: float, within_s: float = 10.0) -> None:
    """Sleep `after_s` (a refusal's length), then wait until `url`'s port accepts connections again."""
    parts = httpx.URL(url)
    # the refusal starts asynchronously: polling at once could see the port before it closes
    time.sleep(after_s)

    def accepts() -> bool:
        try:
            socket.create_connection((parts.host, parts.port or 80), timeout=1).close()
        except OSError:
            return False
        return True

    eventually(accepts, within_s, f"{url} accepts connections {after_s} s after its refusal began")


@dataclass(frozen=True)
class SimHandle:
    """A running simulator."""

    url: str
    port: int
    cert_path: Path | None
    admin_token: str | None
    model: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def ssl_verify(self) -> ssl.SSLContext | bool:
        """What to pass as httpx's `verify`: a context trusting the certificate, or True over HTTP."""
        return ssl.create_default_context(cafile=str(self.cert_path)) if self.cert_path else True

    @property
    def admin_headers(self) -> dict[str, str]:
        """The Authorization header for /admin/faults."""
        return {"authorization": f"Bearer {self.admin_token}"}

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client for this server (its certificate trusted)."""
        return httpx.Client(base_url=self.url, verify=self.ssl_verify, **kwargs)

    def truth(self, request_id: str) -> dict[str, Any]:
        """The ground truth for one request."""
        with self.client() as c:
            r = c.get(f"/debug/requests/{request_id}")
            r.raise_for_status()
            result: dict[str, Any] = r.json()
            return result


def lanewatch_command() -> list[str]:
    """How to run the `lanewatch` CLI from this interpreter's environment."""
    script = Path(sys.executable).parent / "lanewatch"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from lanewatch.collector.cli import main; main()"]


def _flag_args(flags: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for key, value in flags.items():
        opt = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(opt)
        elif isinstance(value, dict | list):
            args += [opt, json.dumps(value)]
        else:
            args += [opt, str(value)]
    return args


@contextmanager
def start_simulator(
    tmp_path: Path,
    profile: str = "fast",
    tls: bool = False,
    otlp_endpoint: str | None = None,
    otlp_protocol: str = "http/protobuf",
    **flags: Any,
) -> Iterator[SimHandle]:
    """Run `lanewatch sim` on a free port until the block exits; yields its handle (spans over
    `otlp_protocol` when given an endpoint: OTLP/HTTP unless the test asks for gRPC)."""
    port = free_port()
    folder = tmp_path / f"sim-{port}"
    folder.mkdir(parents=True)
    token: str | None = None
    if "admin_token_file" not in flags:
        token = secrets.token_hex(16)
        token_file = folder / "admin-token"
        token_file.write_text(token + "\n")
        flags["admin_token_file"] = token_file
    elif flags["admin_token_file"] is not None:
        token = Path(flags["admin_token_file"]).read_text().strip()
    cert = folder / "cert.pem" if tls else None
    args = [*lanewatch_command(), "sim", "--profile", profile, "--host", "127.0.0.1", "--port", str(port)]
    if tls:
        args += ["--tls", "--cert-out", str(cert)]
    if otlp_endpoint:
        args += ["--otlp-endpoint", otlp_endpoint, "--otlp-protocol", otlp_protocol]
    args += _flag_args(flags)
    log_path = folder / "sim.log"
    with started(args, log_path) as proc:
        scheme = "https" if tls else "http"
        handle = SimHandle(
            url=f"{scheme}://127.0.0.1:{port}",
            port=port,
            cert_path=cert,
            admin_token=token,
            model=flags.get("model") or DEFAULT_MODELS[profile],
            process=proc,
            log_path=log_path,
        )
        _wait_healthy(handle)
        yield handle


def _wait_healthy(h: SimHandle) -> None:
    # The TLS sim writes its certificate as it starts: until then ssl_verify cannot load it (OSError).
    # Each try waits 5 s: a sim started with a slow-handshake fault (1 s in the tests) takes that
    # long before it answers anything.
    wait_http(f"{h.url}/health", h.process, h.log_path.read_text, verify=lambda: h.ssl_verify, try_s=5.0)


def wait_http(
    url: str,
    proc: subprocess.Popen[bytes],
    log: Callable[[], str],
    timeout_s: float = START_TIMEOUT_S,
    verify: Callable[[], ssl.SSLContext | bool] = lambda: True,
    try_s: float = 1.0,
) -> None:
    """Poll `url` until it answers 200 (each try within `try_s`); AssertionError with `log()` if `proc`
    exits first or time runs out."""

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args!r} exited with {proc.returncode}:\n{log()}")
        try:
            return httpx.get(url, verify=verify(), timeout=try_s).status_code == 200
        except (httpx.TransportError, OSError):
            return False

    eventually(answers, timeout_s, f"{url} answers 200", context=log)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group; SIGKILL it if it lingers."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass


@contextmanager
def started(
    args: list[str], log_path: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `args` in its own process group, output appended to `log_path`, until the block exits.

    The one way tests start a process: `stop_process` ends it and its children at the end.
    Without `env` the child inherits the C-level environment, which can hold more than
    os.environ (COLUMNS and LINES set by the terminal code); with it, os.environ plus `env`.
    """
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=None if env is None else {**os.environ, **env},
        )
    try:
        yield proc
    finally:
        stop_process(proc)


@contextmanager
def run_service(
    args: list[str], log_path: Path, health_url: str, cwd: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`started`, yielding once `health_url` answers 200; a process that exits first fails with its log."""
    with started(args, log_path, cwd=cwd) as proc:
        wait_http(health_url, proc, lambda: log_path.read_text(errors="replace"))
        yield proc


async def serve_app(app: web.Application, **runner_kw: Any) -> tuple[web.AppRunner, str]:
    """Serve `app` on an ephemeral 127.0.0.1 port: (runner, base URL)."""
    runner = web.AppRunner(app, access_log=None, **runner_kw)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    sock: socket.socket = server.sockets[0]  # type: ignore[attr-defined]
    return runner, f"http://127.0.0.1:{sock.getsockname()[1]}"
