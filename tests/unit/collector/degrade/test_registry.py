"""The adapter registry: config entries by `kind`, older flat keys, the CLI's list and the docs' table."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lanewatch.collector.cli import app
from lanewatch.collector.config import ConfigError, DegradeConfig, load_config
from lanewatch.collector.degrade.adapters import (
    REGISTRY,
    DryRunSettings,
    GatewayAdapter,
    GatewaySettings,
    WebhookSettings,
)
from lanewatch.collector.degrade.runner import build_adapters

from .fake_router import FakeAdapter, FakeSettings

ROOT = Path(__file__).resolve().parents[4]
runner = CliRunner()


@pytest.fixture
def fake_registered() -> Iterator[None]:
    REGISTRY.register(FakeSettings)  # the one registry entry a new adapter takes
    yield
    REGISTRY.unregister("fake")


@pytest.mark.usefixtures("fake_registered")
def test_a_new_adapter_is_one_module_and_one_registry_entry(tmp_path: Path) -> None:
    listed = runner.invoke(app, ["degrade", "adapters"])
    assert listed.exit_code == 0, listed.output
    assert (
        "fake: An in-memory router for tests, in one zone.\n  can: shift\n  settings: name, zone"
        in listed.stdout
    )
    table = runner.invoke(app, ["degrade", "adapters", "--markdown"]).stdout
    assert "| `fake` | yes | no | no | no | `name`, `zone` |" in table
    cfg_file = tmp_path / "lanewatch.yaml"
    cfg_file.write_text("degrade:\n  adapters:\n    - {kind: fake, zone: eu}\n    - kind: dry-run\n")
    cfg = load_config(cfg_file).degrade
    assert cfg.adapters == [FakeSettings(zone="eu"), DryRunSettings()]
    built = build_adapters(cfg)
    assert isinstance(built[0], FakeAdapter) and built[0].zone == "eu" and built[0].name == "fake"
    refused = runner.invoke(app, ["degrade", "serve", "--insecure-dev", "--adapter", "nope"])
    known = f"known: {', '.join(REGISTRY.kinds())}"  # the shipped kinds, then the fake one
    assert known.endswith(", fake")
    assert refused.exit_code == 2 and known in refused.stderr


def test_flat_keys_of_older_configs_become_entries() -> None:
    old = DegradeConfig.model_validate(
        {"gateway_url": "http://gw:8080/", "gateway_token_file": "/run/gw", "adapter_attempts": 5}
    )
    assert old.adapters == [GatewaySettings(url="http://gw:8080", token_file=Path("/run/gw"), attempts=5)]
    both = DegradeConfig.model_validate(
        {"adapters": ["webhook", "dry-run"], "webhook_url": "http://hook", "gateway_url": "http://gw"}
    )
    assert both.adapters == [WebhookSettings(url="http://hook"), DryRunSettings()]  # gateway not chosen
    # a flat key (a flag's) wins over the entry of its kind
    over = DegradeConfig.model_validate(
        {"adapters": [{"kind": "gateway", "url": "http://a", "timeout_s": 2}], "gateway_url": "http://b"}
    )
    assert over.adapters == [GatewaySettings(url="http://b", timeout_s=2)]
    assert DegradeConfig.model_validate(over.model_dump()) == over  # what flag overrides rely on


def test_a_bad_entry_is_named_with_its_field_and_line(tmp_path: Path) -> None:
    f = tmp_path / "lanewatch.yaml"
    f.write_text(
        "degrade:\n  adapters:\n    - kind: dry-run\n    - kind: gateway\n      url: ftp://gw\n"
        "    - kind: envoyy\n    - {kind: dry-run, bogus: 1}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(f)
    issues = {(i.path, i.line): i.message for i in info.value.issues}
    assert "must start with http" in issues[("degrade.adapters.1.url", 5)]
    assert (
        "unknown adapter kind 'envoyy'; known: gateway, webhook, dry-run" in issues[("degrade.adapters.2", 6)]
    )
    assert ("degrade.adapters.3.bogus", 7) in issues


def test_two_entries_of_one_kind_need_names() -> None:
    with pytest.raises(ValueError, match=r"duplicate adapter names .*: webhook"):
        DegradeConfig(
            adapters=[{"kind": "webhook", "url": "http://a"}, {"kind": "webhook", "url": "http://b"}]
        )
    named = DegradeConfig(
        adapters=[
            {"kind": "webhook", "url": "http://a"},
            {"kind": "webhook", "url": "http://b", "name": "edge"},
        ]
    )
    assert [a.label for a in named.adapters] == ["webhook", "edge"]


def test_built_adapters_carry_their_entry_name(tmp_path: Path) -> None:
    token = tmp_path / "gw.token"
    token.write_text("s3cret-token\n")
    cfg = DegradeConfig(
        adapters=[{"kind": "gateway", "url": "http://gw", "token_file": token, "name": "edge"}]
    )
    (adapter,) = build_adapters(cfg)
    assert isinstance(adapter, GatewayAdapter) and adapter.name == "edge"
    assert "s3cret" not in repr(adapter)


def test_docs_carry_the_registry_table() -> None:
    docs = (ROOT / "docs" / "degrade.md").read_text()
    assert REGISTRY.table() in docs, "regenerate with: lanewatch degrade adapters --markdown"


@pytest.mark.parametrize("kind", REGISTRY.kinds())
def test_each_adapter_module_says_what_its_router_can_and_cannot_do(kind: str) -> None:
    doc = importlib.import_module(REGISTRY.settings(kind).__module__).__doc__ or ""
    for part in ("Shift", "shed", "Cannot:"):
        assert part in doc, f"{kind}: the module docstring does not say how it does {part!r}"
