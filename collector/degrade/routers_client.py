"""`lanewatch degrade status --controller URL`: asking a running controller's `GET /routers`."""

from __future__ import annotations

from typing import Any

import httpx

from lanewatch.collector.common.errors import UpstreamError
from lanewatch.collector.common.headers import AUTHORIZATION

__all__ = ["ControllerError", "fetch_routers"]

# Each router's read-back may take up to service.READ_BACK_TIMEOUT_S (10 s); they run at once.
TIMEOUT_S = 30.0


class ControllerError(UpstreamError):
    """The controller could not be asked; the message names what went wrong (never the token)."""


def fetch_routers(url: str, token: str | None, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """The controller's `GET /routers` answer; ControllerError when there is none to use."""
    headers = {AUTHORIZATION: f"Bearer {token}"} if token else {}
    try:
        r = httpx.get(f"{url}/routers", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:  # the type only: a message may carry the URL's parts
        raise ControllerError(f"cannot reach the controller at {url}: {type(exc).__name__}") from None
    if r.status_code == 401:
        raise ControllerError("the controller refused the token (401): pass its --token-file")
    if r.status_code != 200:
        raise ControllerError(f"the controller answered GET /routers with {r.status_code}")
    try:
        body = r.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("routers"), dict):
        raise ControllerError("the controller's GET /routers answer is not a routers report")
    return body
