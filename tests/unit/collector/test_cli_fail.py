from __future__ import annotations

import pytest
import typer

from lanewatch.collector.cli.fail import RUNTIME, USAGE, fail


def test_fail_prints_one_line_naming_the_command_and_exits(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exited:
        fail("gateway", ValueError("admin_token_file /x: the file is empty"))
    assert exited.value.exit_code == USAGE == 2
    assert capsys.readouterr() == ("", "lanewatch gateway: admin_token_file /x: the file is empty\n")
    with pytest.raises(typer.Exit) as exited:
        fail("collect", "cannot listen", RUNTIME)
    assert exited.value.exit_code == RUNTIME == 1
