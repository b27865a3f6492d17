"""lanewatch.alerts: SLO spec to Prometheus recording and alerting rules."""

from .model import Spec
from .render import prometheus_rule, rule_file
from .rules import generate
from .spec import SpecError, load_spec, parse_spec

__all__ = ["Spec", "SpecError", "generate", "load_spec", "parse_spec", "prometheus_rule", "rule_file"]
