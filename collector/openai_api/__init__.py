"""Readers of OpenAI-style bodies as vLLM writes and reads them: a request's tokens and work, the
answer's usage object, vLLM's per-request metrics, and an error's reason."""
