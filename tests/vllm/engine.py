"""A real `vllm serve` (the CPU build made by `make vllm`) on 127.0.0.1, and a span relay in front of it.

`find_install` locates the cached venv and models; `start_vllm` runs one server in its own
process group with the environment the CPU build needs; `SpanRelay` receives vLLM's OTLP/HTTP
exports, keeps every body, and forwards each to whichever lanewatch receivers a test adds.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.servers import free_port, stop_process, wait_http

DEFAULT_VERSION = "0.32.0"
MAX_MODEL_LEN = 2048
START_TIMEOUT_S = 600.0  # 70-120 s on 2 idle cores; much more when the machine is shared
# What the CPU build needs: a small KV cache, no thread pinning, no hub, no usage report.
CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_TARGET_DEVICE": "cpu",
}


@dataclass(frozen=True)
class Install:
    """One cached vLLM version: its venv and its models."""

    version: str
    root: Path

    @property
    def vllm(self) -> Path:
        """The `vllm` command of the venv."""
        return self.root / "venv" / "bin" / "vllm"

    def model(self, name: str) -> Path:
        """A model folder made by deploy/vllm/make_models.py."""
        return self.root / "models" / name


def cache_root() -> Path:
    """Where `make vllm` keeps venvs and models: $LANEWATCH_CACHE or ~/.cache/lanewatch."""
    return Path(os.environ.get("LANEWATCH_CACHE") or Path.home() / ".cache" / "lanewatch")


def version() -> str:
    """The vLLM version the tests run against ($LANEWATCH_VLLM_VERSION, default 0.32.0)."""
    return os.environ.get("LANEWATCH_VLLM_VERSION") or DEFAULT_VERSION


def find_install(ver: str | None = None) -> tuple[Install | None, str]:
    """The cached install of `ver`, or None and why it is not usable."""
    ver = ver or version()
    inst = Install(ver, cache_root() / f"vllm-{ver}")
    if not (inst.root / ".stamp").exists():
        return None, f"no vLLM {ver} in {inst.root} (run `make vllm`)"
    for path in (inst.vllm, inst.model("tiny") / "config.json"):
        if not path.exists():
            return None, f"{path} missing (run `make vllm`)"
    return inst, ""


@dataclass(frozen=True)
class VllmHandle:
    """A running `vllm serve`."""

    url: str
    model: str
    max_model_len: int
    version: str
    process: subprocess.Popen[bytes]
    log_path: Path
    args: tuple[str, ...]
    started_in_s: float

    def log(self) -> str:
        """The server's output so far (for failure messages)."""
        return self.log_path.read_text(errors="replace")


def supports_flag(inst: Install, flag: str) -> bool:
    """Whether this vLLM's `serve` takes `flag` (read from its CLI source, without starting it)."""
    site = next((inst.root / "venv" / "lib").glob("python3*/site-packages/vllm"), None)
    if site is None:
        return False
    needle = flag.removeprefix("--").replace("-", "_")
    for path in site.joinpath("entrypoints").rglob("*.py"):
        with contextlib.suppress(OSError):
            if needle in path.read_text(errors="replace"):
                return True
    return False


@contextmanager
def start_vllm(
    inst: Install, folder: Path, model: str = "tiny", otlp_url: str | None = None, *extra: str
) -> Iterator[VllmHandle]:
    """Run `vllm serve` on a free port until the block exits; its log stays in `folder`."""
    port = free_port()
    args = [
        str(inst.vllm), "serve", str(inst.model(model)), "--served-model-name", model,
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
        "--max-model-len", str(MAX_MODEL_LEN), *extra,
    ]  # fmt: skip
    env = {**os.environ, **CPU_ENV}
    if otlp_url:
        args += ["--otlp-traces-endpoint", otlp_url]
        env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / f"vllm-{model}-{port}.log"
    started = time.monotonic()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(
            f"{url}/health", proc, lambda: log_path.read_text(errors="replace"), timeout_s=START_TIMEOUT_S
        )
        took = time.monotonic() - started
        yield VllmHandle(url, model, MAX_MODEL_LEN, inst.version, proc, log_path, tuple(args), took)
    finally:
        stop_process(proc)


class SpanRelay:
    """An OTLP/HTTP traces endpoint that keeps every export body and forwards it to added receivers."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._downstream: list[str] = []
        self._lock = threading.Lock()
        relay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                relay.received(body, self.headers.get("content-type") or "application/x-protobuf")
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")  # an empty ExportTraceServiceResponse
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self._server.serve_forever, name="span-relay", daemon=True)
        self._thread.start()

    def received(self, body: bytes, content_type: str) -> None:
        """Keep one export body and pass it on."""
        with self._lock:
            self.bodies.append(body)
            targets = list(self._downstream)
        for url in targets:
            req = urllib.request.Request(url, body, {"content-type": content_type}, method="POST")
            with contextlib.suppress(OSError):
                urllib.request.urlopen(req, timeout=5).close()

    @contextmanager
    def forwarding_to(self, url: str) -> Iterator[None]:
        """Forward exports to `url` (a lanewatch /v1/traces) until the block exits."""
        with self._lock:
            self._downstream.append(url)
        try:
            yield
        finally:
            with self._lock:
                self._downstream.remove(url)

    def snapshot(self) -> list[bytes]:
        """The bodies received so far."""
        with self._lock:
            return list(self.bodies)

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
