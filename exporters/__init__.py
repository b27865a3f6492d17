"""lanewatch.exporters: Prometheus and OpenTelemetry exporters over the collector's records."""
