from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.collector.common.secrets import read_secret, read_secret_or_none


def test_a_secret_is_read_stripped(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text("  s3cr3t-value\n")
    assert read_secret(f, "token file") == "s3cr3t-value"
    assert read_secret_or_none(f, "token file") == "s3cr3t-value"
    assert read_secret_or_none(None, "token file") is None


@pytest.mark.parametrize(
    ("content", "reason"),
    [(None, "cannot read: No such file or directory"), ("\n \n", "the file is empty"),
     ("abc def\n", "whitespace inside the secret"), (b"\xff\xfe", "cannot read")],
)  # fmt: skip
def test_bad_secret_files_name_the_setting_and_path_never_the_secret(
    tmp_path: Path, content: str | bytes | None, reason: str
) -> None:
    f = tmp_path / "token"
    if isinstance(content, bytes):
        f.write_bytes(content)
    elif content is not None:
        f.write_text(content)
    with pytest.raises(ValueError, match=r"^ingest\.token_file ") as err:
        read_secret(f, "ingest.token_file")
    assert str(f) in str(err.value) and reason in str(err.value)
    assert "abc" not in str(err.value)
