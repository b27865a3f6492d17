"""A missing real part skips loudly on a workstation and fails CI."""

from __future__ import annotations

import pytest

from tests.conftest import require_binary
from tests.missing import missing


def test_a_missing_part_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and lanewatch-no-such-tool not found"):
        require_binary("lanewatch-no-such-tool")
    with pytest.raises(pytest.fail.Exception, match="CI=true and no engine"):
        missing("no engine")


def test_a_missing_part_skips_loudly_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="SKIPPED LOUDLY: no engine"):
        missing("no engine")
