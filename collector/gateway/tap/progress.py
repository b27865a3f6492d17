"""Reports the gateway's requests under way to the collector's fast guard (`POST /v1/progress`).

The reporter itself is shared with lanewatch's LiteLLM handler, which runs inside another process
and may import only lanewatch's `common` and `record` rooms: it lives in
collector/common/progress_report.py. The gateway's reporter ids start with `gw-`.
"""

from __future__ import annotations

from lanewatch.collector.common.progress_report import NO_GUARD_RETRY_S, ProgressReporter, reporter_id

__all__ = ["NO_GUARD_RETRY_S", "ProgressReporter", "reporter_id"]
