"""lanewatch.simulator: a vLLM-compatible server with a continuous-batching timing model."""
