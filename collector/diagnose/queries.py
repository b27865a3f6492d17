"""The PromQL each signal comes from, per lane and window: the text a finding shows as its source. Pure.

Names come from the conventions module: lanewatch's request series (labelled `lane` by the
collector) and vLLM's own series (labelled `lane` by the scrape config, as deploy/prometheus does).
A renamed vLLM family is queried under its current and its older names.
"""

from __future__ import annotations

import re

from lanewatch.exporters import names

__all__ = ["RUN_TIMEOUT_S", "TIMEOUT_S", "LaneQueries", "valid_duration"]

TIMEOUT_S = 10.0  # one query's deadline, from asking to the answer's last byte (prometheus.py)
RUN_TIMEOUT_S = 120.0  # every query of one diagnosis together
_DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w))+$")


def valid_duration(text: str) -> bool:
    """True for a Prometheus range such as 30s, 10m, 1h30m."""
    return bool(_DURATION.match(text))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class LaneQueries:
    """Every query for one lane over one range."""

    def __init__(self, lane: str, window: str) -> None:
        if not valid_duration(window):
            raise ValueError(f"{window!r} is not a Prometheus duration such as 10m")
        self.lane, self.window = lane, window
        self.sel = f'{{{names.LANE}="{_label(lane)}"}}'

    def _rate(self, metric: str, extra: str = "") -> str:
        sel = self.sel[:-1] + (f",{extra}" if extra else "") + "}"
        return f"rate({metric}{sel}[{self.window}])"

    def requests(self) -> str:
        """Requests finished in the window."""
        return f"sum(increase({names.REQUESTS_TOTAL}{self.sel}[{self.window}]))"

    def errors(self) -> str:
        """Failed requests in the window, by error kind."""
        return (
            f"sum by ({names.ERROR_KIND}) (increase({names.REQUEST_ERRORS_TOTAL}{self.sel}[{self.window}]))"
        )

    def quantile(self, metric: str, q: float) -> str:
        """A latency quantile from lanewatch's histogram (ttft | tpot | e2e | itl)."""
        hist = _HISTOGRAMS[metric]
        return f"histogram_quantile({q:g}, sum by (le) ({self._rate(hist + '_bucket')}))"

    def mean(self, metric: str) -> str:
        """A latency mean: rate of the sum over rate of the count."""
        hist = _HISTOGRAMS[metric]
        return f"sum({self._rate(hist + '_sum')}) / sum({self._rate(hist + '_count')})"

    def phase_sums(self) -> str:
        """Seconds per second spent in each breakdown part."""
        return f"sum by ({names.PHASE}) ({self._rate(names.PHASE_SECONDS + '_sum')})"

    def phase_counts(self) -> str:
        """Records per second with each breakdown part (decode: every record with a breakdown)."""
        return f"sum by ({names.PHASE}) ({self._rate(names.PHASE_SECONDS + '_count')})"

    def class_means(self) -> str:
        """Mean E2E per request class."""
        by = names.REQUEST_CLASS
        e2e = names.E2E_SECONDS
        return f"sum by ({by}) ({self._rate(e2e + '_sum')}) / sum by ({by}) ({self._rate(e2e + '_count')})"

    def fit_fixed_share(self) -> str:
        """The collector's fixed + per-token fit: the fixed share of E2E."""
        return f"max(avg_over_time({names.FIT_FIXED_SHARE_RATIO}{self.sel}[{self.window}]))"

    def gauge(self, family: str, agg: str = "sum") -> str:
        """A vLLM gauge's mean over the window, across the lane's servers (older names too)."""
        return " or ".join(
            f"{agg}(avg_over_time({name}{self.sel}[{self.window}]))"
            for name in names.vllm_family_names(family)
        )

    def counter_rate(self, family: str) -> str:
        """A vLLM counter's rate over the window, across the lane's servers (older names too)."""
        return " or ".join(f"sum({self._rate(name)})" for name in names.vllm_family_names(family))

    def ratio(self, num: str, den: str) -> str:
        """rate(num) / rate(den) across the lane's servers."""
        return f"({self.counter_rate(num)}) / ({self.counter_rate(den)})"

    def spec_acceptance_length(self) -> str:
        """Mean acceptance length: 1 + rate(accepted) / rate(drafts)."""
        num, den = names.VLLM_SPEC_DECODE_NUM_ACCEPTED_TOKENS_TOTAL, names.VLLM_SPEC_DECODE_NUM_DRAFTS_TOTAL
        return f"1 + {self.ratio(num, den)}"

    def prefix_caching(self) -> str:
        """cache_config_info's enable_prefix_caching label, per value."""
        return f"max by (enable_prefix_caching) ({names.VLLM_CACHE_CONFIG_INFO}{self.sel})"

    def step_tokens_p90(self) -> str:
        """P90 tokens per engine step."""
        buckets = self._rate(names.VLLM_ITERATION_TOKENS_TOTAL + "_bucket")
        return f"histogram_quantile(0.9, sum by (le) ({buckets}))"


_HISTOGRAMS = {
    "ttft": names.TTFT_SECONDS,
    "tpot": names.TPOT_SECONDS,
    "e2e": names.E2E_SECONDS,
    "itl": names.ITL_SECONDS,
}
