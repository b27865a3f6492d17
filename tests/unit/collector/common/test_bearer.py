from __future__ import annotations

import pytest

from lanewatch.collector.common.secrets import bearer_ok


@pytest.mark.parametrize(
    ("header", "ok"),
    [("Bearer tok-1", True), ("bearer tok-1", True), ("Bearer  tok-1 ", True), ("Bearer tok-2", False),
     ("Bearer tok-1x", False), ("Basic tok-1", False), ("tok-1", False), ("", False), (None, False),
     ("Bearer tök-1", False)],
)  # fmt: skip
def test_bearer_ok_takes_only_the_token_under_the_bearer_scheme(header: str | None, ok: bool) -> None:
    assert bearer_ok(header, "tok-1") is ok
