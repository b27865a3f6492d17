"""Debian's nginx as the reference reverse proxy: started by the bench, on 127.0.0.1, in a temp prefix.

The configuration is what one would deploy in front of an SSE server: `proxy_buffering
off` (each upstream read goes out at once), HTTP/1.1 with upstream keep-alive, no access
log. One worker process, like the gateway's one Python process, so CPU per chunk compares
like with like (nginx's per-chunk cost does not depend on the worker count).
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["NginxProcess", "children", "find_nginx", "nginx_conf", "start_nginx"]

_SBIN = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


def find_nginx() -> str | None:
    """The nginx binary: on PATH or in the usual sbin folders (root's PATH may lack /usr/sbin)."""
    found = shutil.which("nginx")
    if found:
        return found
    return next((p for p in _SBIN if Path(p).is_file()), None)


def nginx_conf(prefix: Path, port: int, upstream_port: int, workers: int = 1) -> str:
    """The reverse-proxy configuration, `workers` worker processes (all it writes stays in `prefix`)."""
    temp = {k: prefix / k for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
    return f"""
daemon off;
master_process on;
worker_processes {workers};
worker_rlimit_nofile 16384;
pid {prefix / "nginx.pid"};
error_log {prefix / "error.log"} warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    client_body_temp_path {temp["client_body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    upstream sse {{
        server 127.0.0.1:{upstream_port};
        keepalive 1024;
        keepalive_requests 1000000;
    }}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        keepalive_requests 1000000;
        location / {{
            proxy_pass http://sse;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


@dataclass(frozen=True)
class NginxProcess:
    """A running nginx: its URL and its processes' ids (master first)."""

    url: str
    master: subprocess.Popen[bytes]
    prefix: Path

    def pids(self) -> list[int]:
        """The master and its workers (CPU counts for all of them)."""
        return [self.master.pid, *children(self.master.pid)]


def children(pid: int) -> list[int]:
    """Processes whose parent is `pid` (from /proc/*/stat: the kernel may lack .../children)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            kids.append(int(stat.parent.name))
    return sorted(kids)


@contextmanager
def start_nginx(
    binary: str, prefix: Path, port: int, upstream_port: int, workers: int = 1
) -> Iterator[NginxProcess]:
    """Run nginx (`workers` worker processes) in front of 127.0.0.1:upstream_port until the block exits."""
    prefix.mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(nginx_conf(prefix, port, upstream_port, workers))
    log = (prefix / "stderr.log").open("wb")
    proc = subprocess.Popen(
        [binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(proc, f"{url}/health", prefix)
        yield NginxProcess(url, proc, prefix)
    finally:
        if proc.poll() is None:
            proc.terminate()  # SIGTERM: fast shutdown of master and workers
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        log.close()


def _wait(proc: subprocess.Popen[bytes], url: str, prefix: Path) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            errors = (
                (prefix / "error.log").read_text(errors="replace") if (prefix / "error.log").exists() else ""
            )
            raise RuntimeError(f"nginx exited with {proc.returncode}: {errors[-2000:]}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.05)
    raise RuntimeError(f"nginx not answering {url} after 15 s")
