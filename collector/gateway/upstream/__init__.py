"""The upstream side: each lane's pool of upstreams (least outstanding, health ejection), the
request head that goes upstream, and the forward stage, which streams the answer back unbuffered.

The third room on the request path: at run time it imports the front and admission only; the
exchange and the tap it fills and feeds are handed to it, named for the type checker alone.
"""
