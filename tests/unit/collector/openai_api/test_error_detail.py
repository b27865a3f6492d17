"""The server's error message as a record keeps it: found in any error shape, one line, cut, no secrets."""

from __future__ import annotations

import json

import pytest

from lanewatch.collector.openai_api.error_detail import (
    MAX_CHARS,
    clean,
    error_detail,
    redact,
    status_description,
)

VLLM_400 = {
    "error": {
        "message": "This model's maximum context length is 2048 tokens. However, you requested 2100 "
        "tokens (100 in the messages, 2000 in the completion). Please reduce the length.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (json.dumps(VLLM_400), VLLM_400["error"]["message"]),
        ('{"object": "error", "message": "old style", "type": "BadRequestError", "code": 400}', "old style"),
        ('{"detail": "Not Found"}', "Not Found"),
        ('{"error": "plain string"}', "plain string"),
        ('data: {"error": {"message": "mid stream", "type": "InternalServerError"}}', "mid stream"),
        ("<html><body>502 Bad Gateway</body></html>", "<html><body>502 Bad Gateway</body></html>"),
        ('{"error": {"message": "cut sh', '{"error": {"message": "cut sh'),  # not JSON after all: as text
        ("", None),
        ("   \n ", None),
    ],
)
def test_the_message_is_found_in_each_error_shape(body: str, message: str | None) -> None:
    assert error_detail(body.encode()) == message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer [redacted]"),
        ("bad key sk-proj-AbCdEf123456", "bad key [redacted]"),
        ("api_key=hunter2hunter2 max_tokens=5", "api_key=[redacted] max_tokens=5"),
        ('{"token": "s3cr3t"}', '{"token": "[redacted]"}'),
        ("password: letmein", "password: [redacted]"),
        ("X-Api-Key=abc123", "X-Api-Key=[redacted]"),
        ("hf token hf_abcdefghijklmnopqrstuvwx", "hf token [redacted]"),
        ("id 3f2b9c0d8e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c", "id [redacted]"),
        (
            "you requested 5000 tokens; max_tokens must be <= 2048",
            "you requested 5000 tokens; max_tokens must be <= 2048",
        ),
    ],
)
def test_secrets_are_redacted_and_ordinary_words_kept(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_clean_is_one_line_and_cut_with_an_ellipsis() -> None:
    assert clean("a\nb\t\x00c  d") == "a b c d"
    long = "word " * 100
    out = clean(long)
    assert out is not None and len(out) == MAX_CHARS and out.endswith("…")
    assert clean("x" * MAX_CHARS) == "x" * MAX_CHARS  # exactly at the limit: not cut


def test_a_secret_across_the_cut_is_redacted_whole_not_half_kept() -> None:
    secret = "sk-" + "Z9" * 20
    text = "e" * (MAX_CHARS - 10) + " " + secret
    out = clean(text)
    assert out is not None and "Z9" not in out and len(out) <= MAX_CHARS


def test_status_description_adds_the_message_to_the_kind() -> None:
    assert status_description("http_4xx", "too long") == "http_4xx: too long"
    assert status_description("stall", None) == "stall"
