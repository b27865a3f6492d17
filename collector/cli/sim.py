"""`lanewatch sim`: a vLLM-compatible server with a continuous-batching timing model."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from .app import app

if TYPE_CHECKING:
    from lanewatch.simulator.profiles import Profile


class ProfileName(StrEnum):
    """Timing profiles (lanewatch.simulator.profiles)."""

    fast = "fast"
    slow = "slow"


@app.command("sim", short_help="Serve a vLLM-compatible simulator (no GPU needed).")
def sim(
    profile: ProfileName = typer.Option(
        ProfileName.fast, "--profile", help="Timing profile: fast (~1B model, 1 GPU) or slow (~70B, 2 GPUs)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(8000, "--port", min=1, max=65535, help="TCP port to listen on."),
    tls: bool = typer.Option(False, "--tls", help="Serve HTTPS with a fresh self-signed certificate."),
    cert_out: Path | None = typer.Option(
        None,
        "--cert-out",
        help="With --tls: where to write the certificate clients should trust (default: a temp file).",
    ),
    cert: Path | None = typer.Option(
        None, "--cert", help="Serve HTTPS with this PEM certificate (with --key)."
    ),
    key: Path | None = typer.Option(None, "--key", help="The PEM private key for --cert."),
    model: str | None = typer.Option(
        None, "--model", help="Served model name (default: the profile's model)."
    ),
    otlp_endpoint: str | None = typer.Option(
        None,
        "--otlp-endpoint",
        help="Where llm_request spans go, as vllm serve --otlp-traces-endpoint: http://HOST:4317 over "
        "gRPC, or a full http://HOST:4318/v1/traces URL with --otlp-protocol http/protobuf.",
    ),
    otlp_protocol: str = typer.Option(
        "grpc",
        "--otlp-protocol",
        envvar="OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        show_envvar=True,
        help="How spans are sent, as vLLM reads it from the same variable: grpc (vLLM's default, "
        "no TLS) or http/protobuf.",
    ),
    admin_token_file: Path | None = typer.Option(
        None,
        "--admin-token-file",
        help="File holding the bearer token for /admin/faults (without it: no admin API).",
    ),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="VLLM_API_KEY",
        show_envvar=True,
        help="As vllm serve: /v1/* requires `Authorization: Bearer <key>` (prefer the env var to argv).",
    ),
    per_request_metrics: bool = typer.Option(
        False,
        "--enable-per-request-metrics",
        help="As vllm serve: put `metrics` (queue, TTFT from scheduling, generation time, mean ITL, "
        "tokens per second) on the final usage chunk and on non-streamed bodies.",
    ),
    prompt_tokens_details: bool = typer.Option(
        False,
        "--enable-prompt-tokens-details",
        help="As vllm serve: put `prompt_tokens_details.cached_tokens` (prompt tokens the prefix cache "
        "served) in usage, for a request that hit the cache.",
    ),
    seed: int = typer.Option(0, "--seed", help="Seed for output text and fault draws."),
    faults: str | None = typer.Option(
        None, "--faults", help="Faults from the start: a JSON object or @FILE (see POST /admin/faults)."
    ),
    max_num_seqs: int | None = typer.Option(
        None, "--max-num-seqs", min=1, max=4096, help="Override the profile's max_num_seqs."
    ),
    max_num_batched_tokens: int | None = typer.Option(
        None,
        "--max-num-batched-tokens",
        min=16,
        max=1_048_576,
        help="As vllm serve: the per-step token budget that prefill chunks share with running decodes "
        "(default: the profile's, fast 8192, slow 2048).",
    ),
    num_speculative_tokens: int = typer.Option(
        0,
        "--num-speculative-tokens",
        min=0,
        max=16,
        help="Speculative decoding: draft tokens per decode step (0: off, as vLLM without "
        "--speculative-config).",
    ),
    spec_acceptance: float = typer.Option(
        0.7,
        "--spec-acceptance",
        min=0.0,
        max=1.0,
        help="With --num-speculative-tokens: the chance a drafted token is accepted given that the "
        "ones before it were.",
    ),
    spec_draft_token_s: float = typer.Option(
        0.0,
        "--spec-draft-token-s",
        min=0.0,
        max=1.0,
        help="With --num-speculative-tokens: the proposer's seconds per draft position per step (0: n-gram).",
    ),
    frontend_s: float | None = typer.Option(
        None,
        "--frontend-s",
        min=0.0,
        max=60.0,
        help="Seconds the API front end takes per request before the engine's queue (default: the "
        "profile's 0.004).",
    ),
    frontend_per_token_s: float | None = typer.Option(
        None,
        "--frontend-per-token-s",
        min=0.0,
        max=0.01,
        help="Front-end seconds per prompt token (tokenization; default: the profile's 1e-6).",
    ),
    prefix_caching: bool = typer.Option(
        True,
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="As vllm serve: reuse the KV blocks of prompts' shared leading blocks.",
    ),
    keep_alive_s: int = typer.Option(
        30,
        "--keep-alive-s",
        min=1,
        max=3600,
        help="Close a kept-alive connection idle this long (vLLM's uvicorn: 5).",
    ),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn log level."),
) -> None:
    """Serve vLLM's OpenAI API, /metrics and OTLP spans from a simulated engine (no GPU needed)."""
    from lanewatch.collector.common.serving import ServeLimits, uvicorn_config
    from lanewatch.simulator import tls as tls_mod
    from lanewatch.simulator.app import SimConfig, Simulator
    from lanewatch.simulator.faults import FaultError, FaultSpec, parse_faults
    from lanewatch.simulator.profiles import PROFILES
    from lanewatch.simulator.server import ServeOptions, build_server
    from lanewatch.simulator.specdecode import SpecDecodeConfig

    _check_tls(tls, cert_out, cert, key)
    if otlp_endpoint is not None and not otlp_endpoint.startswith(("http://", "https://")):
        raise typer.BadParameter("must be an http:// or https:// URL", param_hint="--otlp-endpoint")
    from lanewatch.simulator.tracing import PROTOCOLS

    if otlp_protocol not in PROTOCOLS:
        raise typer.BadParameter(f"must be one of {', '.join(PROTOCOLS)}", param_hint="--otlp-protocol")
    token = _read_token(admin_token_file) if admin_token_file else None
    try:
        fault_spec = parse_faults(_faults_json(faults)) if faults else FaultSpec()
    except FaultError as exc:
        raise typer.BadParameter(str(exc), param_hint="--faults") from None
    prof = _profile(PROFILES[profile.value], max_num_batched_tokens, frontend_s, frontend_per_token_s)
    spec_config = (
        SpecDecodeConfig(num_speculative_tokens, spec_acceptance, spec_draft_token_s)
        if num_speculative_tokens
        else None
    )
    if api_key is not None and not api_key.strip():
        raise typer.BadParameter("is empty", param_hint="--api-key")
    cfg = SimConfig(
        prof,
        model or prof.model.name,
        seed,
        max_num_seqs,
        token,
        otlp_endpoint,
        otlp_protocol,
        fault_spec,
        api_key,
        per_request_metrics,
        spec_config,
        prefix_caching,
        prompt_tokens_details,
    )
    keyfile = key
    if tls:
        pair = tls_mod.self_signed()
        cert_out = cert_out or Path(tempfile.gettempdir()) / f"lanewatch-sim-{port}-cert.pem"
        tls_mod.write_cert(pair, cert_out)
        cert, keyfile = cert_out, tls_mod.private_key_file(pair)
    try:
        # a cap above the largest max_num_seqs plus its queue; pooled clients keep connections for 30 s
        limits = ServeLimits(max_connections=4096, keep_alive_s=keep_alive_s)
        opts = ServeOptions(host, port, cert, keyfile, log_level)
        server = build_server(Simulator(cfg), opts, make_config=partial(uvicorn_config, limits=limits))
    finally:
        if tls and keyfile is not None:
            keyfile.unlink(missing_ok=True)
            keyfile.parent.rmdir()
    scheme = "https" if cert else "http"
    typer.echo(
        f"lanewatch sim: {prof.name} profile serving {cfg.model} at {scheme}://{host}:{port}", err=True
    )
    if tls:
        typer.echo(f"lanewatch sim: certificate written to {cert_out}", err=True)
    server.run()


def _profile(
    prof: Profile, budget: int | None, frontend_s: float | None, frontend_per_token_s: float | None
) -> Profile:
    """The profile with the command line's overrides."""
    changes: dict[str, Any] = {}
    if budget is not None:
        changes["max_num_batched_tokens"] = budget
    if frontend_s is not None:
        changes["frontend_s"] = frontend_s
    if frontend_per_token_s is not None:
        changes["frontend_per_token_s"] = frontend_per_token_s
    return dataclasses.replace(prof, **changes)


def _check_tls(tls: bool, cert_out: Path | None, cert: Path | None, key: Path | None) -> None:
    if tls and (cert or key):
        raise typer.BadParameter("use either --tls (a fresh certificate) or --cert/--key", param_hint="--tls")
    if cert_out and not tls:
        raise typer.BadParameter("only makes sense with --tls", param_hint="--cert-out")
    if bool(cert) != bool(key):
        raise typer.BadParameter("--cert and --key go together", param_hint="--cert/--key")
    for name, path in (("--cert", cert), ("--key", key)):
        if path is not None and not path.is_file():
            raise typer.BadParameter(f"no such file: {path}", param_hint=name)


def _read_token(path: Path) -> str:
    from lanewatch.collector.common.secrets import SecretError, read_secret

    try:
        return read_secret(path, "admin token file")
    except SecretError as exc:
        raise typer.BadParameter(str(exc), param_hint="--admin-token-file") from None


def _faults_json(text: str) -> Any:
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise typer.BadParameter(
                f"cannot read {text[1:]}: {exc.strerror}", param_hint="--faults"
            ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"invalid JSON: {exc}", param_hint="--faults") from None
