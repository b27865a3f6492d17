"""Deterministic probe prompts: the same class and sequence number give the same text.

A prompt built from `prompt_words` starts with the probe's sequence number, so no two
probes share a prefix: a server's prefix cache cannot turn a long-input class into a
short one, while every run still sends the same sequence of prompts. An exact
`prompt` from the config is sent as written.
"""

from __future__ import annotations

import zlib

from lanewatch.collector.probe.settings import RequestClass

_WORDS: tuple[str, ...] = (
    "river", "stone", "lamp", "orbit", "meadow", "signal", "copper", "harbor",
    "ledger", "canyon", "pepper", "violet", "engine", "garden", "thunder", "pocket",
    "silver", "window", "cactus", "marble", "falcon", "ribbon", "tunnel", "lantern",
    "glacier", "compass", "timber", "velvet", "anchor", "summit", "feather", "basket",
    "crystal", "island", "mirror", "planet", "saddle", "violin", "walnut", "beacon",
    "candle", "desert", "ember", "forest", "granite", "hollow", "ivory", "jungle",
    "kettle", "ladder", "magnet", "needle", "oyster", "pillow", "quartz", "rocket",
    "shadow", "tablet", "umbrella", "valley", "wander", "yellow", "zephyr", "bridge",
)  # fmt: skip

_INSTRUCTIONS = {
    "summary": "Summarize the following text.",
    "story": "Write a long story that uses these words.",
}


def prompt_words(name: str, count: int) -> str:
    """`count` deterministic words for class `name`."""
    seed = zlib.crc32(name.encode("utf-8"))
    n = len(_WORDS)
    return " ".join(_WORDS[(seed + i * 37 + (i * i) // 7) % n] for i in range(count))


def prompt_text(request_class: RequestClass, seq: int = 0) -> str:
    """The prompt for probe number `seq` of a class."""
    if request_class.prompt is not None:
        return request_class.prompt
    lead = _INSTRUCTIONS.get(request_class.name, "Answer briefly.")
    words = prompt_words(request_class.name, request_class.prompt_words)
    return f"Probe {seq % 100_000_000:08d}. {lead} {words}"
