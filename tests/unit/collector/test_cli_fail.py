from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from lanewatch.collector.cli import app
from lanewatch.collector.cli import probe as probe_cli
from lanewatch.collector.cli.fail import RUNTIME, USAGE, exit_code, fail
from lanewatch.collector.common.errors import ConfigError, LanewatchError, StartupError, UpstreamError
from lanewatch.collector.common.secrets import SecretError


def test_fail_prints_one_line_naming_the_command_and_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exited:
        fail("gateway", ValueError("admin_token_file /x: the file is empty"))
    assert exited.value.exit_code == USAGE == 2
    assert capsys.readouterr() == ("", "lanewatch gateway: admin_token_file /x: the file is empty\n")
    with pytest.raises(typer.Exit) as exited:
        fail("collect", "cannot listen", RUNTIME)
    assert exited.value.exit_code == RUNTIME == 1


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ConfigError("--shard: '2/2' must be i/N"), USAGE),
        (SecretError("ingest.token_file /t: the file is empty"), USAGE),
        (StartupError("cannot listen on 127.0.0.1:80"), RUNTIME),
        (UpstreamError("the gateway answered 503"), RUNTIME),
    ],
)
def test_fail_exits_by_the_kind_of_error(
    error: LanewatchError, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert exit_code(error) == code
    with pytest.raises(typer.Exit) as exited:
        fail("probe", error)
    assert exited.value.exit_code == code
    assert capsys.readouterr().err == f"lanewatch probe: {error}\n"


def _probe(monkeypatch: pytest.MonkeyPatch, raised: BaseException) -> Result:
    """`lanewatch probe` whose run raises `raised` (a bug, or an error lanewatch names)."""

    async def run(*args: object, **kwargs: object) -> list[object]:
        raise raised

    monkeypatch.setattr(probe_cli, "_run", run)
    return CliRunner().invoke(app, ["probe", "http://127.0.0.1:9", "-m", "m"])


def test_a_bug_raising_value_error_in_probe_is_a_crash_not_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    done = _probe(monkeypatch, ValueError("a bug, not the user's input"))
    assert done.exit_code == RUNTIME, done.output  # Python's traceback and exit 1, as for any crash
    assert isinstance(done.exception, ValueError)
    assert "lanewatch probe:" not in done.stderr and "error:" not in done.stderr


def test_a_config_error_in_probe_exits_2_through_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    done = _probe(monkeypatch, ConfigError("targets[x].api_key_file /k: the file is empty"))
    assert (done.exit_code, done.stderr) == (
        USAGE,
        "lanewatch probe: targets[x].api_key_file /k: the file is empty\n",
    )


def test_an_empty_api_key_file_is_bad_input_named_by_fail(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("\n")
    done = CliRunner().invoke(app, ["probe", "http://127.0.0.1:9", "-m", "m", "--api-key-file", str(key)])
    assert done.exit_code == USAGE, done.output
    assert done.stderr == f"lanewatch probe: targets[127.0.0.1:9].api_key_file {key}: the file is empty\n"


def test_a_flag_the_target_refuses_is_bad_input_naming_the_field() -> None:
    done = CliRunner().invoke(app, ["probe", "http://127.0.0.1:9", "-m", "m", "--lane", "no spaces"])
    assert done.exit_code == USAGE, done.output
    assert done.stderr.startswith("lanewatch probe: invalid settings:\n  lane: bad lane name 'no spaces'")
