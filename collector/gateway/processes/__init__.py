"""The gateway's processes: `lanewatch gateway`'s entry point (serve.py), and with `--workers N` the
supervisor, each worker's main, what one worker of N gets (per_worker.py) and the channel between
them (control_channel.py).

Not a stage of the request path but what runs it: it builds the gateway from every room.
"""
