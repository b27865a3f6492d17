"""HTTP/1.1 on bare asyncio, as the gateway and the prober speak it: message heads and body
framing, the keep-alive client and its phase stamps, and the server-sent event stream parser."""
