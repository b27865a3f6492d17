"""Posts the guard's alerts to Alertmanager's API (`POST /api/v2/alerts`), to each configured instance."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp

__all__ = ["AlertmanagerPost"]

log = logging.getLogger("lanewatch.guard")
ALERTS_PATH = "/api/v2/alerts"


class AlertmanagerPost:
    """Sends postable alerts to every Alertmanager; True when at least one took them."""

    def __init__(self, urls: list[str], timeout_s: float = 2.0) -> None:
        self.urls = [u.rstrip("/") + ALERTS_PATH for u in urls]
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None
        self._failing: set[str] = set()

    async def __call__(self, alerts: list[dict[str, Any]]) -> bool:
        """Post `alerts` to each Alertmanager (as Prometheus does: every instance of an HA pair)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        took = False
        for url in self.urls:
            took |= await self._post(self._session, url, alerts)
        return took

    async def _post(self, session: aiohttp.ClientSession, url: str, alerts: list[dict[str, Any]]) -> bool:
        try:
            async with session.post(url, json=alerts) as resp:
                ok = resp.status == 200
                detail = (
                    ""
                    if ok
                    else f"HTTP {resp.status}: {(await resp.content.read(512)).decode(errors='replace')}"
                )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            ok, detail = False, type(exc).__name__
        if not ok and url not in self._failing:
            log.warning("the fast guard cannot post alerts to %s (%s); retrying", url, detail)
            self._failing.add(url)
        elif ok and url in self._failing:
            log.info("the fast guard posts alerts to %s again", url)
            self._failing.discard(url)
        return ok

    async def close(self) -> None:
        """Close the session."""
        if self._session is not None:
            await self._session.close()
            self._session = None
