"""The baseline the gateway is measured against: a bare aiohttp server + aiohttp client proxy.

It forwards the request body and each upstream read as it arrives, and nothing else: no
routing, no tap, no spans. Run: `python bench/aiohttp_passthrough.py --port P --upstream URL`.
"""

from __future__ import annotations

import argparse

import aiohttp
from aiohttp import web

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "accept-encoding"}


def build(upstream: str) -> web.Application:
    """A pass-through proxy app to `upstream`."""
    app = web.Application()
    key: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)

    async def session_ctx(app: web.Application):  # type: ignore[no-untyped-def]
        app[key] = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
        )
        yield
        await app[key].close()

    async def proxy(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP}
        async with app[key].post(upstream + request.path, data=body, headers=headers) as up:
            resp = web.StreamResponse(status=up.status)
            for k, v in up.headers.items():
                if k.lower() not in HOP:
                    resp.headers[k] = v
            await resp.prepare(request)
            async for data in up.content.iter_any():
                await resp.write(data)
            await resp.write_eof()
            return resp

    async def health(_r: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.cleanup_ctx.append(session_ctx)
    app.router.add_post("/v1/chat/completions", proxy)
    app.router.add_get("/healthz", health)
    return app


def main() -> None:
    """Serve the pass-through proxy."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    web.run_app(build(args.upstream), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
