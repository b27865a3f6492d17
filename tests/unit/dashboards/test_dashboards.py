from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.dashboards import build, panels
from lanewatch.dashboards.templating import VARIABLES
from lanewatch.exporters import names

STALE = "stale: run `lanewatch dashboards build` (or `make generate`) and commit the result"
DASHBOARDS = {name: json.loads(text) for name, text in build.dashboard_files().items()}


def all_panels() -> list[tuple[str, dict[str, Any]]]:
    return [(name, p) for name, d in DASHBOARDS.items() for p in d["panels"]]


def test_one_dashboard_per_view_with_the_uids_alerts_link_to() -> None:
    uids = {d["uid"] for d in DASHBOARDS.values()}
    assert uids == {
        names.DASHBOARD_OVERVIEW_UID,
        names.DASHBOARD_LATENCY_UID,
        names.DASHBOARD_LANES_UID,
        names.DASHBOARD_SERVER_UID,
        names.DASHBOARD_DEGRADE_UID,
    }


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_template_variables(name: str) -> None:
    variables = DASHBOARDS[name]["templating"]["list"]
    assert tuple(v["name"] for v in variables) == VARIABLES
    assert variables[0]["type"] == "datasource" and variables[0]["query"] == "prometheus"
    for v in variables[1:]:
        assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert v["includeAll"] and v["multi"] and v["allValue"] == ".*"
        assert v["query"].startswith(f"label_values({names.REQUESTS_TOTAL}")


@pytest.mark.parametrize(
    ("dashboard", "panel"), all_panels(), ids=lambda x: x if isinstance(x, str) else x["title"]
)
def test_every_panel_has_unit_thresholds_and_a_description_for_red(
    dashboard: str, panel: dict[str, Any]
) -> None:
    defaults = panel["fieldConfig"]["defaults"]
    assert defaults["unit"], panel["title"]
    steps = defaults["thresholds"]["steps"]
    assert steps and steps[0]["value"] is None
    assert [s["value"] for s in steps[1:]] == sorted(s["value"] for s in steps[1:])
    assert len(panel["description"]) > 60 and "red" in panel["description"].lower()
    assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert panel["targets"] and all(t["datasource"] == panel["datasource"] for t in panel["targets"])
    pos = panel["gridPos"]
    assert pos["x"] >= 0 and pos["x"] + pos["w"] <= panels.WIDTH


@pytest.mark.parametrize("name", sorted(DASHBOARDS))
def test_panels_do_not_overlap(name: str) -> None:
    cells: set[tuple[int, int]] = set()
    for p in DASHBOARDS[name]["panels"]:
        g = p["gridPos"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, p["title"]
        cells |= mine


def test_every_metric_a_panel_reads_is_a_known_name() -> None:
    # Module-level names, plus vLLM's older names kept in the rename table.
    known = {v for v in vars(names).values() if isinstance(v, str)} | set(names.VLLM_LEGACY_ALIASES)
    for _, panel in all_panels():
        for target in panel["targets"]:
            for metric in re.findall(
                r"(?<![\w:])([a-zA-Z_][\w]*:[\w:]+|lanewatch_\w+|ALERTS)\b", target["expr"]
            ):
                base = re.sub(r"_(bucket|count|sum)$", "", metric)
                assert metric in known or base in known, (panel["title"], metric)


def test_request_panels_follow_the_template_variables() -> None:
    for _, panel in all_panels():
        for target in panel["targets"]:
            for selector in re.findall(
                r"(?<![\w:])lanewatch_(?:requests_total|request_errors_total|(?:ttft|tpot|itl|e2e|phase)_seconds_\w+)\{([^}]*)\}",
                target["expr"],
            ):
                assert (
                    'target=~"$target"' in selector
                    and 'lane=~"$lane"' in selector
                    and 'model=~"$model"' in selector
                )


def test_panel_builders_refuse_a_panel_without_red_guidance_or_unit() -> None:
    q = [panels.Query("up")]
    with pytest.raises(ValueError, match="what to do when it is red"):
        panels.timeseries("t", "shows things", q, "s", [("green", None)])
    with pytest.raises(ValueError, match="what to do when it is red"):
        panels.stat("t", "red: act", q, "", [("green", None)])
    with pytest.raises(ValueError, match="base step"):
        panels.timeseries("t", "red: act", q, "s", [("green", 1.0)])


def test_layout_wraps_at_the_dashboard_width() -> None:
    q = [panels.Query("up")]
    laid = panels.layout(
        [
            panels.timeseries("t", "red", q, "s", [("green", None)], w=w, h=h)
            for w, h in ((12, 8), (12, 4), (8, 5))
        ]
    )
    assert [(p.gridPos.x, p.gridPos.y) for p in laid] == [(0, 0), (12, 0), (0, 8)]


def test_committed_dashboards_are_fresh() -> None:
    for path, text in build.outputs().items():
        assert path.exists() and path.read_text(encoding="utf-8") == text, f"{path} {STALE}"


def test_cli_rebuilds_into_a_folder_identically(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["dashboards", "build", "--out", str(tmp_path), "--kubernetes", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    for name in DASHBOARDS:
        assert (tmp_path / name).read_text() == (build.GENERATED_DIR / name).read_text(), f"{name} {STALE}"
    assert (tmp_path / build.CONFIGMAP_FILE).read_text() == (
        build.KUBERNETES_DIR / build.CONFIGMAP_FILE
    ).read_text()


def test_configmap_carries_every_dashboard_for_the_sidecar() -> None:
    manifest = yaml.safe_load((build.KUBERNETES_DIR / build.CONFIGMAP_FILE).read_text())
    assert manifest["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert {k: json.loads(v) for k, v in manifest["data"].items()} == DASHBOARDS
    assert len((build.KUBERNETES_DIR / build.CONFIGMAP_FILE).read_bytes()) < 256 * 1024
