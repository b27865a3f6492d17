"""The tap bench's peers: Envoy's bootstrap, LiteLLM's offline config, the --peers flag, best-of-workers
keys, the peer goals and the rows of peers that could not run."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from bench.envoy_proxy import envoy_bootstrap
from bench.litellm_proxy import litellm_config, litellm_env
from bench.report import evaluate_goals, render
from bench.tap_overhead import flat_keys, parse_peers


def test_envoy_bootstrap_proxies_the_listener_to_the_upstream_without_timeouts() -> None:
    config = envoy_bootstrap(9001, 9002, 8001)
    listener = config["static_resources"]["listeners"][0]
    assert listener["address"]["socket_address"] == {"address": "127.0.0.1", "port_value": 9001}
    assert config["admin"]["address"]["socket_address"]["port_value"] == 9002
    hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["codec_type"] == "HTTP1" and hcm["stream_idle_timeout"] == "0s"
    route = hcm["route_config"]["virtual_hosts"][0]["routes"][0]["route"]
    assert route == {"cluster": "bench", "timeout": "0s"}  # a stream lasts as long as the upstream writes
    assert "access_log" not in hcm and "tracing" not in hcm
    cluster = config["static_resources"]["clusters"][0]
    endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
    assert endpoint["address"]["socket_address"]["port_value"] == 8001
    assert cluster["circuit_breakers"]["thresholds"][0]["max_requests"] >= 1024  # past 512 streams


def test_litellm_config_points_one_openai_model_at_the_upstream_with_nothing_else_on() -> None:
    config = litellm_config("http://127.0.0.1:8001")
    (model,) = config["model_list"]
    assert model["model_name"] == "bench"
    assert model["litellm_params"]["model"] == "openai/bench"
    assert model["litellm_params"]["api_base"] == "http://127.0.0.1:8001/v1"
    assert config["general_settings"]["dangerously_permit_weak_or_unset_master_key"] is True  # loopback only
    settings = config["litellm_settings"]
    assert settings["telemetry"] is False
    assert settings["callbacks"] == settings["success_callback"] == settings["failure_callback"] == []
    env = litellm_env({"PATH": "/bin", "DATABASE_URL": "postgres://x", "LITELLM_MASTER_KEY": "sk-1"})
    assert env["PATH"] == "/bin" and "DATABASE_URL" not in env and "LITELLM_MASTER_KEY" not in env
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True" and env["LITELLM_TELEMETRY"] == "False"


def test_parse_peers_maps_levels_to_paths_and_names_a_bad_part() -> None:
    assert parse_peers("64:envoy+litellm,512:tap-2+nginx-2") == {
        64: ["envoy", "litellm"],
        512: ["tap-2", "nginx-2"],
    }
    assert parse_peers("") == {}
    with pytest.raises(ValueError, match="'64'"):
        parse_peers("64")
    with pytest.raises(ValueError, match="unknown path 'haproxy'"):
        parse_peers("64:haproxy")


def _figures(p99: float) -> dict[str, Any]:
    return {
        "added_ttft_p99_ms": p99, "added_ttft_p50_ms": 0.5, "proxy_cpu_s_per_1k_chunks": 0.01,
        "proxy_user_cpu_s_per_1k_chunks": 0.005, "chunks_per_s": 100.0,
    }  # fmt: skip


def test_best_of_workers_takes_the_lower_added_p99_and_says_which() -> None:
    levels = {
        "512": {
            "tap": _figures(12.0),
            "tap-2": _figures(7.5),
            "nginx": _figures(2.0),
            "nginx-2": _figures(3.0),
        },
        "64": {"tap": _figures(1.0), "nginx": _figures(0.5)},  # no two-worker paths: no best-of keys
    }
    keys = flat_keys(levels)
    assert keys["tap_best_added_ttft_p99_ms_512"] == 7.5 and keys["tap_best_workers_512"] == 2
    assert keys["nginx_best_added_ttft_p99_ms_512"] == 2.0 and keys["nginx_best_workers_512"] == 1
    assert "tap_best_added_ttft_p99_ms_64" not in keys
    assert keys["tap-2_added_ttft_p99_ms_512"] == 7.5  # each path's own figures too


PEER_KEYS = {
    "tap_added_ttft_p50_ms_64": 0.9,
    "envoy_added_ttft_p50_ms_64": 0.3,
    "litellm_added_ttft_p50_ms_64": 3.0,
    "tap_best_added_ttft_p99_ms_512": 9.0,
    "nginx_best_added_ttft_p99_ms_512": 2.0,
    "tap_cpu_s_per_1k_chunks_64": 0.035,
    "nginx_cpu_s_per_1k_chunks_64": 0.02,
    "envoy_cpu_s_per_1k_chunks_64": 0.0234,
}


def test_peer_goals_hold_the_tap_to_envoy_and_litellm_with_nginx_as_context() -> None:
    goals = {g.id: g for g in evaluate_goals(PEER_KEYS)}
    assert (goals["tap_p50_vs_envoy"].limit, goals["tap_p50_vs_envoy"].met) == (0.8, False)  # 0.3 + 0.5
    assert (goals["tap_p50_vs_litellm"].limit, goals["tap_p50_vs_litellm"].met) == (0.75, False)  # ¼ of 3
    assert (goals["tap_cpu_vs_envoy"].limit, goals["tap_cpu_vs_envoy"].met) == (0.0351, True)  # 1.5 ×
    costlier = {g.id: g.met for g in evaluate_goals({**PEER_KEYS, "tap_cpu_s_per_1k_chunks_64": 0.0352})}
    assert costlier["tap_cpu_vs_envoy"] is False
    # nginx's CPU, p50 and its 512-stream figures limit no goal: they are the tables' context
    limits = {g.id: g.limit for g in evaluate_goals({**PEER_KEYS, "nginx_cpu_s_per_1k_chunks_64": 1.0})}
    assert limits == {g.id: g.limit for g in goals.values()}
    assert not [g for g in goals.values() if g.key.endswith("_512")]
    better = evaluate_goals({**PEER_KEYS, "tap_added_ttft_p50_ms_64": 0.5})
    assert {g.id: g.met for g in better}["tap_p50_vs_envoy"] is True
    assert {g.id: g.met for g in better}["tap_p50_vs_litellm"] is True
    missing = {g.id: g.met for g in evaluate_goals({"tap_added_ttft_p50_ms_64": 0.5})}
    assert missing["tap_p50_vs_litellm"] is None  # LiteLLM did not run: not measured, not met


def test_render_says_which_peers_could_not_run_and_why() -> None:
    level = {"direct": _row(), "litellm": _row()}
    results = {
        "date": "2026-12-01T10:00:00+00:00", "duration_s": 1.0,
        "machine": {"cpu_model": "x", "cores": 2, "memory_gib": 1, "kernel": "6", "python": "3.11"},
        "load_avg_start": [0, 0, 0], "load_avg_end": [0, 0, 0],
        "goals": [asdict(g) for g in evaluate_goals({})],
        "details": {"tap": {"64": level}, "tap_unavailable": {"envoy": "envoy not found"}},
    }  # fmt: skip
    text = render(results, {})
    assert "- `envoy`: not measured here: envoy not found" in text
    assert "| 64 | litellm |" in text


def _row() -> dict[str, Any]:
    return {
        "requests": 1, "chunks_per_s": 1.0, "ttft_p50_ms": 50.0, "ttft_p99_ms": 51.0,
        "upstream_cpu_s_per_1k_chunks": 0.001, "client_cpu_s_per_1k_chunks": 0.001,
        "added_ttft_p50_ms": 1.0, "added_ttft_p99_ms": 2.0,
    }  # fmt: skip


def test_a_peer_that_cannot_run_here_is_unavailable_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from bench import peer_paths

    def no_install() -> Path:
        raise RuntimeError("installing litellm[proxy]==1 failed: no network")

    monkeypatch.setattr(peer_paths, "find_envoy", lambda: None)
    monkeypatch.setattr(peer_paths, "ensure_litellm", no_install)
    with ExitStack() as stack:
        with pytest.raises(peer_paths.Unavailable, match="envoy not found"):
            peer_paths.start_peer(stack, tmp_path, "envoy-2", "http://127.0.0.1:1")
        with pytest.raises(peer_paths.Unavailable, match="no network"):
            peer_paths.start_peer(stack, tmp_path, "litellm", "http://127.0.0.1:1")
