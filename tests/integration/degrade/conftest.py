"""The degrade tests' shared fixtures: a private PostgreSQL for the controller pair."""

from tests.postgres import fresh, pg

__all__ = ["fresh", "pg"]
