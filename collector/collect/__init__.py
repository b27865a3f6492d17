"""The `lanewatch collect` service: scraping, OTLP and record ingest, GPU sampling, the wiring."""
