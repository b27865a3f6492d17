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
from pathlib import Path

from .machine import ProxyProcess

__all__ = ["find_nginx", "nginx_conf", "start_nginx"]

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


@contextmanager
def start_nginx(
    binary: str, prefix: Path, port: int, upstream_port: int, workers: int = 1
) -> Iterator[ProxyProcess]:
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
        yield ProxyProcess(url, proc)
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
