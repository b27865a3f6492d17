"""lanewatch.dashboards: Grafana dashboards as code (grafanalib)."""

from .build import DASHBOARDS, dashboard_files

__all__ = ["DASHBOARDS", "dashboard_files"]
