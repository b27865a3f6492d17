"""Contract tests against a real vLLM (CPU build) and the captured fixtures they refresh."""
