"""`lanewatch sim` refuses bad flags with a clear error before it starts anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--profile", "medium"], "--profile"),
        (["--port", "70000"], "--port"),
        (["--cert-out", "x.pem"], "--cert-out"),
        (["--cert", "nope.pem"], "--cert"),
        (["--tls", "--cert", "a", "--key", "b"], "--tls"),
        (["--otlp-endpoint", "127.0.0.1:4318"], "--otlp-endpoint"),
        (["--otlp-protocol", "http/json"], "--otlp-protocol"),
        (["--admin-token-file", "/nonexistent/token"], "--admin-token-file"),
        (["--faults", "{not json"], "--faults"),
        (["--faults", '{"decode_slowdown": 0}'], "decode_slowdown"),
        (["--faults", '{"bogus": 1}'], "bogus"),
        (["--faults", "@/nonexistent/faults.json"], "--faults"),
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["--max-num-batched-tokens", "8"], "--max-num-batched-tokens"),
        (["--num-speculative-tokens", "17"], "--num-speculative-tokens"),
        (["--spec-acceptance", "1.5"], "--spec-acceptance"),
        (["--spec-draft-token-s", "-1"], "--spec-draft-token-s"),
        (["--frontend-s", "-0.1"], "--frontend-s"),
        (["--frontend-per-token-s", "1"], "--frontend-per-token-s"),
        (["--keep-alive-s", "0"], "--keep-alive-s"),
        (["--faults", '{"tls_handshake_delay_s": -1}'], "tls_handshake_delay_s"),
    ],
)
def test_bad_flags_give_clear_errors(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(app, ["sim", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_empty_token_file_is_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("\n")
    result = CliRunner().invoke(app, ["sim", "--admin-token-file", str(token)])
    assert result.exit_code == 2 and "empty" in result.output


def test_help_lists_every_option() -> None:
    result = CliRunner().invoke(app, ["sim", "--help"])
    assert result.exit_code == 0
    for opt in (
        "--profile",
        "--tls",
        "--cert-out",
        "--otlp-endpoint",
        "--otlp-protocol",
        "--admin-token-file",
        "--faults",
        "--seed",
        "--max-num-batched-tokens",
        "--num-speculative-tokens",
        "--spec-acceptance",
        "--frontend-s",
        "--keep-alive-s",
        "--no-enable-prefix-caching",
    ):
        assert opt in result.output


def test_the_protocol_comes_from_vllms_variable_and_is_checked() -> None:
    env = {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}
    result = CliRunner().invoke(app, ["sim"], env=env)
    assert result.exit_code == 2 and "--otlp-protocol" in result.output and "grpc" in result.output
