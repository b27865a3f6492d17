"""`litellm`: the LiteLLM proxy, through lanewatch's handler in it (integrations/litellm/).

The handler serves the gateway's admin API (`PUT`/`GET /admin/degrade`, the same wire format) on
a port of its own (`admin_port` in its settings), so this adapter is the gateway's adapter aimed
at it; what differs is what the proxy does with the state, in its pre-call hook:
- Shift: the lane's share of requests goes to the faster lane's model group (`lane_groups`, else
  the first model group the handler's lane map gives that lane): LiteLLM's router picks that
  group's deployment.
- Cap max_tokens: the gateway's `cap_max_tokens` on the request body before LiteLLM sends it.
- Shed: a request whose class is shed gets a 429 with `Retry-After`, its class decided by the
  handler's class rules (the gateway's `gateway.classes` format and code, over the body LiteLLM
  hands the hook), the client's `x-lanewatch-class` header only where the handler trusts it.
- Read-back: `GET /admin/degrade`, the state and revision the proxy holds.
- Cannot: keep the state across the proxy's restart (the reconcile re-applies it); share it
  between LiteLLM workers (each `--num_workers` process holds its own: run one, or one endpoint
  per worker); choose a lane by anything but the model group.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import ClassVar, Literal

from .base import ALL_ACTIONS, Adapter, Capability, read_secret
from .gateway import GatewayAdapter
from .http import HttpAdapterSettings

__all__ = ["LitellmSettings"]

log = logging.getLogger("lanewatch.degrade.adapters")


class LitellmSettings(HttpAdapterSettings):
    """The LiteLLM proxy's lanewatch handler; `url` is the handler's admin endpoint (its admin_port)."""

    kind: Literal["litellm"] = "litellm"
    token_file: Path | None = None  # the handler's admin_token_file

    capabilities: ClassVar[frozenset[Capability]] = ALL_ACTIONS

    def build(self) -> Adapter:
        """The gateway's adapter aimed at the handler's endpoint, with its token."""
        if self.token_file is None:
            log.warning("adapter %s: no token_file: calling the handler without a token", self.label)
        token = read_secret(self.token_file, "litellm token file") if self.token_file else None
        return GatewayAdapter(self.url, token, name=self.label, timeout_s=self.timeout_s, retry=self.retry)
