"""The envoy adapter against a stand-in admin API: counting the route file's take from stats, failures."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from lanewatch.collector.degrade.adapters import AdapterError, EnvoyAdapter, EnvoySettings
from lanewatch.collector.degrade_state.wire import LaneDegrade
from tests.layout import ROOT

SHIFT = {"slow": LaneDegrade(shift_to="fast", shift_percent=100)}


class Admin:
    """Envoy's /stats for route configuration `lanes` on two listeners; takes each new file when told."""

    def __init__(self, takes: bool = True, rejects: bool = False, named: str = "lanes") -> None:
        self.success, self.rejected = 1, 0
        self.takes, self.rejects, self.named = takes, rejects, named
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls > 1:  # the file is in place by the second call (the first is the count before)
            self.success += 1 if self.takes and self.success == 1 else 0
            self.rejected += 1 if self.rejects and self.rejected == 0 else 0
        n = self.named
        body = (
            f"http.llm.rds.{n}.update_success: {self.success}\n"
            f"http.llm.rds.{n}.update_rejected: {self.rejected}\n"
            f"http.other.rds.{n}.update_success: 7\n"
        )
        return httpx.Response(200, text=body)


def _adapter(tmp_path: Path, admin: Admin, **kw: object) -> EnvoyAdapter:
    routes = tmp_path / "routes"
    routes.mkdir(exist_ok=True)
    settings = EnvoySettings(
        route_template=ROOT / "deploy" / "envoy" / "routes.template.yaml",
        route_file=routes / "routes.yaml",
        validate_with_envoy=False,
        **kw,
    )
    return EnvoyAdapter(settings, transport=httpx.MockTransport(admin))


async def test_a_file_envoy_counts_is_kept_and_not_written_again(tmp_path: Path) -> None:
    admin = Admin()
    adapter = _adapter(tmp_path, admin)
    await adapter.apply(SHIFT, 1)
    assert "weight: 1000" in (tmp_path / "routes" / "routes.yaml").read_text()
    calls = admin.calls
    await adapter.apply(SHIFT, 2)  # the same state, taken already: no write, no admin call
    assert admin.calls == calls


async def test_a_file_envoy_rejects_is_replaced_by_the_previous_one(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, Admin(takes=False, rejects=True))
    route_file = tmp_path / "routes" / "routes.yaml"
    route_file.write_text("previous\n")
    with pytest.raises(AdapterError, match=r"rejected .*update_rejected.*previous file is back") as caught:
        await adapter.apply(SHIFT, 1)
    assert not caught.value.retryable and route_file.read_text() == "previous\n"


async def test_a_file_envoy_never_counts_is_a_retryable_error(tmp_path: Path) -> None:
    adapter = _adapter(tmp_path, Admin(takes=False), confirm_timeout_s=0.2)
    with pytest.raises(AdapterError, match="did not count the new route file") as caught:
        await adapter.apply(SHIFT, 1)
    assert caught.value.retryable


async def test_an_envoy_without_the_route_configuration_says_which_name_to_check(tmp_path: Path) -> None:
    route_file = tmp_path / "routes" / "routes.yaml"
    adapter = _adapter(tmp_path, Admin(named="other"))
    with pytest.raises(AdapterError, match="no route configuration 'lanes'"):
        await adapter.apply(SHIFT, 1)
    assert not route_file.exists()  # nothing is written before Envoy can be asked


def test_the_envoy_adapter_caps_the_work_through_its_lua_script() -> None:
    assert EnvoySettings.capabilities == frozenset({"shift", "cap_max_tokens", "shed", "rewrite_model"})
