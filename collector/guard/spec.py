"""The fast guard built from the SLO spec: one alert per lane TTFT SLO, with the labels and
annotations of the generated mitigation rule, and the firing ratio the spec's mitigation uses."""

from __future__ import annotations

from pathlib import Path

from lanewatch.alerts.model import Spec
from lanewatch.alerts.spec import DEFAULT_SPEC, load_spec
from lanewatch.collector.common.errors import ConfigError
from lanewatch.collector.guard.alert import GuardAlert
from lanewatch.collector.guard.decide import GuardRule
from lanewatch.collector.guard.guard import FastGuard
from lanewatch.collector.guard.settings import GuardConfig

__all__ = ["DEFAULT_GUARD_RATIO", "guard_alerts", "load_guard"]

DEFAULT_GUARD_RATIO = 0.5  # alerts/windows.yaml's standard mitigation errorRatio


def load_guard(g: GuardConfig, spec_path: Path | None) -> FastGuard | None:
    """The fast guard `g` describes, its thresholds and labels from the SLO spec at `spec_path` (the
    bundled default without one); None when off.

    SpecError names a spec that does not load; ConfigError says why a spec cannot drive the guard.
    """
    if not g.enabled:
        return None
    spec = load_spec(spec_path or DEFAULT_SPEC)
    ratio = g.error_ratio if g.error_ratio is not None else _spec_ratio(spec)
    alerts = guard_alerts(spec, ratio, g.instance)
    if not alerts:
        raise ConfigError("guard.enabled: the SLO spec has no lane TTFT SLO without a selector to guard")
    rule = GuardRule(
        fire_window_s=g.fire_window_s,
        resolve_window_s=g.resolve_window_s,
        min_judged=g.min_judged,
        min_missed=g.min_missed,
        fire_ratio=ratio,
        resolve_ratio=g.resolve_ratio if g.resolve_ratio is not None else ratio / 2,
    )
    return FastGuard(alerts, rule, g.record_sources, g.resend_s)


def _spec_ratio(spec: Spec) -> float:
    """The spec's mitigation error ratio; without `mitigate` windows, the standard set's 50 %."""
    return spec.mitigation.error_ratio if spec.mitigation is not None else DEFAULT_GUARD_RATIO


def guard_alerts(
    spec: Spec, ratio: float = DEFAULT_GUARD_RATIO, instance: str | None = None
) -> list[GuardAlert]:
    """One guard alert per lane TTFT SLO: the generated mitigation rule's labels and annotations
    (those the spec's rules carry, or would with `mitigate` windows at `ratio`), and `instance`
    (the collector's name among several) when given.

    An SLO with a selector is left to the rules (progress carries no request class); of two TTFT
    SLOs on one lane, the tighter threshold is guarded.
    """
    from dataclasses import replace

    from lanewatch.alerts.mitigation import mitigation_alerts
    from lanewatch.alerts.model import Mitigation

    if spec.mitigation is None:  # the labels and text a mitigation rule of this spec would have
        spec = replace(spec, mitigation=Mitigation(window_s=60, error_ratio=ratio, for_s=0, interval_s=5))
    groups = mitigation_alerts(spec, ())
    rules = groups[-1].rules if groups else ()
    out: dict[str, GuardAlert] = {}
    for slo, rule in zip(spec.slos, rules, strict=True):
        if slo.metric != "ttft" or slo.threshold_s is None or slo.selector or rule.alert is None:
            continue
        known = out.get(slo.lane)
        if known is not None and known.threshold_s <= slo.threshold_s:
            continue
        labels = (("alertname", rule.alert), *rule.labels, *((("instance", instance),) if instance else ()))
        out[slo.lane] = GuardAlert(slo.lane, slo.name, slo.threshold_s, labels, rule.annotations)
    return list(out.values())
