"""lanewatch.dashboards: Grafana dashboards as code (grafanalib)."""
