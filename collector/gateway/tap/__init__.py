"""The tap: what one proxied answer tells about latency, read off its bytes in passing (the stream
scan, and the content tap that also keeps the text), the exchange it fills in, the record and span
made of it, the trace context sent upstream, and the requests under way reported to the fast guard.

The fourth room on the request path: at run time it imports the earlier rooms' types only.
"""
