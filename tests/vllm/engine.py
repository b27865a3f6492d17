"""A real `vllm serve` (the CPU build made by `make vllm`) on 127.0.0.1.

`find_install` locates the cached venv and models; `start_vllm` runs one server in its own
process group with the environment the CPU build needs, exporting spans in vLLM's default
mode (OTLP/gRPC, no protocol variable set) when given an endpoint.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from lanewatch.collector.demo.engines import CPU_ARGS, CPU_ENV, VLLM_VERSION, vllm_cache
from tests.servers import free_port, stop_process, wait_http

MAX_MODEL_LEN = 2048
START_TIMEOUT_S = 600.0  # 70-120 s on 2 idle cores; much more when the machine is shared
# With it, the final usage chunk carries vLLM's own per-request timings (0.32 has it).
PER_REQUEST_METRICS = "--enable-per-request-metrics"
# OpenTelemetry's protocol variables; with neither set, vLLM's span exporter speaks OTLP/gRPC.
DEFAULT_MODE_UNSET = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


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


def version() -> str:
    """The vLLM version the tests run against ($LANEWATCH_VLLM_VERSION, default 0.32.0)."""
    return os.environ.get("LANEWATCH_VLLM_VERSION") or VLLM_VERSION


def find_install(ver: str | None = None) -> tuple[Install | None, str]:
    """The cached install of `ver`, or None and why it is not usable."""
    ver = ver or version()
    inst = Install(ver, vllm_cache() / f"vllm-{ver}")
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
    inst: Install,
    folder: Path,
    model: str = "tiny",
    otlp_url: str | None = None,
    *extra: str,
    max_model_len: int = MAX_MODEL_LEN,
    env_extra: dict[str, str] | None = None,
) -> Iterator[VllmHandle]:
    """Run `vllm serve` on a free port until the block exits, spans over gRPC to `otlp_url`."""
    port = free_port()
    args = [
        str(inst.vllm), "serve", str(inst.model(model)), "--served-model-name", model,
        "--host", "127.0.0.1", "--port", str(port), *CPU_ARGS,
        "--max-model-len", str(max_model_len), *extra,
    ]  # fmt: skip
    env = {**os.environ, **CPU_ENV, **(env_extra or {})}  # the demo's: what the CPU build needs
    for name in DEFAULT_MODE_UNSET:
        env.pop(name, None)  # unset, vLLM exports over gRPC (no TLS): its default, what is under test
    if otlp_url:
        args += ["--otlp-traces-endpoint", otlp_url]
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
        yield VllmHandle(url, model, max_model_len, inst.version, proc, log_path, tuple(args), took)
    finally:
        stop_process(proc)


@contextmanager
def started_together(*servers: AbstractContextManager[VllmHandle]) -> Iterator[list[VllmHandle]]:
    """Enter `start_vllm` blocks at once (their starts overlap), exit them all when the block exits."""
    with ExitStack() as stack, ThreadPoolExecutor(len(servers)) as pool:
        futures = [pool.submit(cm.__enter__) for cm in servers]
        handles: list[VllmHandle] = []
        for cm, future in zip(servers, futures, strict=True):
            if future.exception() is None:  # waits; a server that started is stopped on the way out
                stack.push(cm)
                handles.append(future.result())
        for future in futures:
            future.result()  # the first failure to start, once every started one will be stopped
        yield handles
