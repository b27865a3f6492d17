"""Code that runs inside another process (the LiteLLM proxy): it imports only the record, common and
classification rules of lanewatch, never blocks its host's event loop, and stays bounded when
lanewatch is down."""
