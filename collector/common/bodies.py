"""Reading a request body with a size limit, for the collector's ASGI edges."""

from __future__ import annotations

from starlette.requests import Request


async def read_limited(request: Request, limit: int) -> bytes | None:
    """The request body, or None as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)
