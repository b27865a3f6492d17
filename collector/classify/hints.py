"""The gateway's request classification, as config: which clients may hint; the RE2 check of regexes.

Part of the one config model (config.py: `gateway.hints`, `gateway.classes`). A request's
class is what shedding acts on and what every request metric is labelled with, so by default
the operator decides it, not the client: the `x-lanewatch-class` and `x-lanewatch-lane`
headers are honoured only from a trusted network or with the hint token, and otherwise
the first matching class rule names the class (then `gateway.default_class`). The rules
themselves live in classify/rules.py, which the LiteLLM handler shares.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import re2  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator

from lanewatch.collector.common.validation import ClassName

__all__ = ["HintsConfig", "check_prompt_regex"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HintsConfig(_Section):
    """Who may choose a request's class and lane with the gateway's headers; by default, nobody."""

    # Clients whose address lies in one of these networks (CIDR, e.g. 10.0.0.0/8, ::1/128).
    trusted_networks: list[str] = Field(default_factory=list)
    # A bearer token: a client sending `Authorization: Bearer <it>` may hint. Never logged.
    token_file: Path | None = None
    # The classes a trusted client may name; any other name counts as `other`.
    classes: list[ClassName] = Field(default_factory=lambda: ["interactive", "batch"])

    @field_validator("trusted_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for net in value:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as exc:
                raise ValueError(f"bad network {net!r}: {exc}") from None
        return value


_QUIET = re2.Options()
_QUIET.log_errors = False  # the error is raised with the field named; not printed to stderr too


def check_prompt_regex(pattern: str) -> str:
    """The pattern, when RE2 (linear time) compiles it; ValueError otherwise."""
    try:
        re2.compile(pattern, _QUIET)
    except re2.error as exc:
        raise ValueError(f"RE2 cannot compile this regular expression: {exc}") from None
    return pattern
