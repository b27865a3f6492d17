"""A minimal stand-in for the collector's `POST /v1/records`: the tap bench's gateway ships to it.

It reads each batch, counts its records and answers 200 `{"accepted": n}` as the collector
does; it validates nothing, joins nothing and exports nothing, so its CPU is the transport's
alone (the bench reports it apart from the tap's). `GET /stats` gives the records taken.
Run: `python -m bench.records_sink --port P`.
"""

from __future__ import annotations

import argparse
import json

from aiohttp import web

_RECORD = b'"source":'  # one per record of record_batch.py's form: a count, not a parse


def build() -> web.Application:
    """The sink app: POST /v1/records, GET /stats, GET /health."""
    taken = {"batches": 0, "records": 0}

    async def records(request: web.Request) -> web.Response:
        body = await request.read()
        n = body.count(_RECORD)
        taken["batches"] += 1
        taken["records"] += n
        return web.Response(body=json.dumps({"accepted": n}).encode(), content_type="application/json")

    async def stats(_r: web.Request) -> web.Response:
        return web.json_response(taken)

    async def health(_r: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/records", records)
    app.router.add_get("/stats", stats)
    app.router.add_get("/health", health)
    return app


def main() -> None:
    """Serve the sink."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    web.run_app(build(), host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
