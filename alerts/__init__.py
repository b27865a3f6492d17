"""lanewatch.alerts: SLO spec to Prometheus recording and alerting rules."""
