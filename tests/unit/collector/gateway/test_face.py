"""The gateway's face: every name it lists resolves, and loading the one config loads no gateway."""

from __future__ import annotations

import subprocess
import sys

from lanewatch.collector import gateway


def test_every_name_of_the_face_resolves_from_its_module() -> None:
    assert sorted(gateway.__all__) == sorted(gateway._FACE)
    for name in gateway.__all__:
        assert getattr(gateway, name) is not None, name


def test_loading_the_config_imports_the_gateways_settings_and_nothing_else_of_it() -> None:
    code = (
        "import sys, lanewatch.collector.config as c; "
        "print(sorted(m for m in sys.modules if m.startswith('lanewatch.collector.gateway')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['lanewatch.collector.gateway', 'lanewatch.collector.gateway.settings']"
