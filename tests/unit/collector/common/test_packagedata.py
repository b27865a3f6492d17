"""Shipped data is found through the package, and the source checkout is recognised."""

from __future__ import annotations

import pytest

from lanewatch.collector.common.input_files import PackageDataError, data_path, source_checkout
from tests.layout import ROOT


def test_data_path_finds_a_shipped_file() -> None:
    path = data_path("lanewatch.deploy", "prometheus/prometheus.yml")
    assert path.is_file()
    assert "scrape_configs" in path.read_text(encoding="utf-8")


def test_data_path_names_the_missing_file() -> None:
    with pytest.raises(PackageDataError, match=r"lanewatch\.deploy has no 'nope\.yml'"):
        data_path("lanewatch.deploy", "nope.yml")


def test_an_editable_install_runs_from_this_checkout() -> None:
    assert source_checkout() == ROOT
