"""What every config section shares: unknown keys are errors, and where a service listens.

Here, not in collector/config.py, so that each room's own settings module can build on them
without importing the config that composes it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Section", "ServerConfig"]


class Section(BaseModel):
    """Base for config sections: unknown keys are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerConfig(Section):
    """Where a lanewatch service listens."""

    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)
    max_connections: int = Field(default=256, ge=1)  # requests past it are answered 503
    keep_alive_s: int = Field(default=5, ge=1)  # an idle kept-alive connection is closed after this
    head_timeout_s: float = Field(default=10.0, gt=0)  # a request head must be complete within this
