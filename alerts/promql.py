"""Small, pure PromQL builders: selectors, rates, sums and quantiles as text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from .duration import format_duration

# (label, operator, value), e.g. ("lane", "=", "fast") or ("job", "=~", "vllm.*")
Matcher = tuple[str, str, str]


def num(value: float) -> str:
    """A number as PromQL text, without float noise: 0.01, 13.44, 0.9333333333, 10."""
    return format(value, ".10g")


def quote(value: str) -> str:
    """A PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def eq(labels: Iterable[tuple[str, str]]) -> list[Matcher]:
    """Exact matchers for (label, value) pairs."""
    return [(k, "=", v) for k, v in labels]


def selector(metric: str, matchers: Sequence[Matcher] = ()) -> str:
    """metric{a="b",c=~"d"}; just the metric name without matchers."""
    if not matchers:
        return metric
    inner = ",".join(f"{label}{op}{quote(value)}" for label, op, value in matchers)
    return f"{metric}{{{inner}}}"


def rate(metric: str, matchers: Sequence[Matcher], window_s: int) -> str:
    """rate(selector[window])."""
    return f"rate({selector(metric, matchers)}[{format_duration(window_s)}])"


def aggregate(op: str, by: Sequence[str], expr: str) -> str:
    """op by (labels) (expr), or op(expr) without labels; op is sum, max, avg, ..."""
    return f"{op} by ({', '.join(by)}) ({expr})" if by else f"{op}({expr})"


def sum_by(by: Sequence[str], expr: str) -> str:
    """sum by (labels) (expr), or sum(expr) without labels."""
    return aggregate("sum", by, expr)


def histogram_quantile(
    q: float, histogram: str, matchers: Sequence[Matcher], by: Sequence[str], window_s: int
) -> str:
    """The q-quantile of a classic histogram, aggregated by `by` (plus le)."""
    buckets = rate(f"{histogram}_bucket", matchers, window_s)
    return f"histogram_quantile({num(q)}, {sum_by([*by, 'le'], buckets)})"


def either(names: Sequence[str], expr: Callable[[str], str]) -> str:
    """`expr` over each of a family's names joined by `or`: whichever the target exposes (first wins)."""
    parts = [expr(name) for name in names]
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"
