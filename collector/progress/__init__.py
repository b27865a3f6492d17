"""Requests under way, the contract between every router and the fast guard: the in-flight table,
the `POST /v1/progress` body, and the reporter that sends it."""
