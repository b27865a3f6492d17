"""The gateway's front: it accepts client connections, parses their HTTP/1.1 requests, answers
the admin API and its own endpoints, and words every error answer as OpenAI's (as vLLM does).

The first room on the request path: it imports no other room of the gateway at run time.
"""
