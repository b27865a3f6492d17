"""Who may feed the collector: each ingest credential, and what it may speak for.

A sender presents a bearer token; `IngestAuth.identify` finds the credential it belongs to,
comparing it with every configured token in constant time (so the answer's timing says
neither the token nor which credential matched). A credential is the shared one
(`ingest.token_file`: every reporter, every feed) or one reporter's (`ingest.reporters`):
that one speaks for progress reports whose `reporter` is its name or starts `<name>-`, and
sends only its `feeds`. With no token configured the ingest is open: anyone is `ANYONE`.
Tokens live only inside `IngestAuth`; a credential, its repr and every error hold names alone.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.common.secrets import bearer_ok, read_secret, read_secret_or_none

if TYPE_CHECKING:
    from lanewatch.collector.collect.settings import IngestConfig

__all__ = ["ALL_FEEDS", "ANYONE", "Credential", "IngestAuth", "IngestKeys", "as_auth", "load_ingest_auth"]

ALL_FEEDS: Final = frozenset({"progress", "tap", "litellm", "envoy", "probe"})


@dataclass(frozen=True, slots=True)
class Credential:
    """What one token may send: `name` None for the shared token (or an open ingest)."""

    name: str | None
    feeds: frozenset[str] = ALL_FEEDS

    def may_report_as(self, reporter: str) -> bool:
        """Whether it may post progress under this reporter id."""
        if self.name is None:
            return True
        return reporter == self.name or reporter.startswith(self.name + "-")

    def may_send(self, feed: str) -> bool:
        """Whether it may send this feed (`progress`, or a record source)."""
        return feed in self.feeds

    @property
    def label(self) -> str:
        """How an error names it."""
        return "the shared ingest token" if self.name is None else f"reporter {self.name!r}"


ANYONE: Final = Credential(None)


class IngestAuth:
    """The configured tokens; none: the ingest is open."""

    __slots__ = ("_keys",)

    def __init__(self, shared: str | None = None, reporters: Iterable[tuple[Credential, str]] = ()) -> None:
        keys = [(Credential(None), shared)] if shared is not None else []
        keys += list(reporters)
        self._keys: tuple[tuple[Credential, str], ...] = tuple(keys)

    def __repr__(self) -> str:  # never the tokens
        return f"IngestAuth({[c.label for c, _ in self._keys]})"

    @property
    def open(self) -> bool:
        """Whether no token is asked for."""
        return not self._keys

    def identify(self, header: str | None) -> Credential | None:
        """The credential whose token an Authorization header carries; ANYONE when open; None: no match."""
        if not self._keys:
            return ANYONE
        found: Credential | None = None
        for credential, token in self._keys:  # every token compared: no early exit
            if bearer_ok(header, token) and found is None:
                found = credential
        return found


IngestKeys = IngestAuth | str | None  # an endpoint's token argument: the whole set, one shared token, or open


def as_auth(keys: IngestKeys) -> IngestAuth:
    """An endpoint's token argument as an IngestAuth (a bare token is the shared one)."""
    return keys if isinstance(keys, IngestAuth) else IngestAuth(keys)


def load_ingest_auth(ingest: IngestConfig) -> IngestAuth:
    """Read every token `ingest` names. SecretError names the setting of a file that cannot be used;
    ConfigError names two settings that hold the same token (one would speak as the other)."""
    shared = read_secret_or_none(ingest.token_file, "ingest.token_file")
    named: list[tuple[Credential, str]] = []
    seen: list[tuple[str, str]] = [] if shared is None else [(shared, "ingest.token_file")]
    for i, r in enumerate(ingest.reporters):
        what = f"ingest.reporters[{i}].token_file"
        token = read_secret(r.token_file, what)
        for earlier, where in seen:  # compared as every token is, in constant time
            if hmac.compare_digest(earlier.encode(), token.encode()):
                raise ConfigError(f"{what} holds the same token as {where}: give each reporter its own")
        seen.append((token, what))
        named.append((Credential(r.name, frozenset(r.feeds)), token))
    return IngestAuth(shared, named)
