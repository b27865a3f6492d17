"""Older vLLM pages: renamed families read under their current names, missing ones reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from lanewatch.collector.collect.family_notices import FamilyNotices
from lanewatch.collector.collect.scrape import (
    ServerSnapshot,
    ServerWindow,
    missing_families,
    snapshot_from_text,
)
from lanewatch.exporters import names

FIXTURES = Path(__file__).parents[3] / "fixtures"
OLD_PAGE = FIXTURES / "vllm-0.8-from-source" / "metrics.txt"
TPOT = names.VLLM_REQUEST_TIME_PER_OUTPUT_TOKEN_SECONDS
# What each committed page lacks of the families lanewatch reads; captured pages lack nothing.
EXPECTED_MISSING = {"vllm-0.8-from-source": (TPOT,)}


def old_snapshot(text: str | None = None, target: str = "old", at: float = 1.0) -> ServerSnapshot:
    return snapshot_from_text(target, "fast", text or OLD_PAGE.read_text(), at, 0.01)


def test_older_page_is_read_under_the_current_names() -> None:
    snap = old_snapshot()
    assert snap.up
    assert snap.gauges[names.VLLM_KV_CACHE_USAGE_PERC] == 0.125
    assert (
        snap.counters[names.VLLM_PREFIX_CACHE_QUERIES_TOTAL]
        > snap.counters[names.VLLM_PREFIX_CACHE_HITS_TOTAL]
        > 0
    )
    itl = snap.histograms[names.VLLM_INTER_TOKEN_LATENCY_SECONDS]
    assert itl.count > 24 and itl.bounds[0] == 0.01  # time_per_output_token's buckets, one per token gap
    assert snap.legacy_names == frozenset(names.VLLM_LEGACY_ALIASES)
    assert missing_families(snap.families) == (TPOT,)


def test_a_current_name_beside_its_older_one_wins_and_the_older_is_not_reported() -> None:
    """vLLM 0.9 and 0.10 expose both spellings of the renamed gauges and counters."""
    both = OLD_PAGE.read_text() + (
        f'{names.VLLM_KV_CACHE_USAGE_PERC}{{engine="0",model_name="tiny"}} 0.5\n'
        f'{names.VLLM_PREFIX_CACHE_QUERIES_TOTAL}{{engine="0",model_name="tiny"}} 7.0\n'
    )
    snap = old_snapshot(both)
    assert snap.gauges[names.VLLM_KV_CACHE_USAGE_PERC] == 0.5
    assert snap.counters[names.VLLM_PREFIX_CACHE_QUERIES_TOTAL] == 7.0
    assert "vllm:gpu_cache_usage_perc" not in snap.legacy_names
    assert "vllm:gpu_prefix_cache_queries_total" not in snap.legacy_names
    assert "vllm:gpu_prefix_cache_hits_total" in snap.legacy_names  # its current name is still absent


def test_window_over_an_older_page_gives_itl_quantiles_and_the_missing_tpot() -> None:
    w = ServerWindow("old", "fast", window_s=60)
    first = OLD_PAGE.read_text()
    # A second scrape with the same page doubled: every counter and bucket grew.
    w.add(old_snapshot(first, at=1.0))
    doubled = "\n".join(_double(line) for line in first.splitlines()) + "\n"
    w.add(old_snapshot(doubled, at=2.0))
    stats = w.stats(2.0)
    assert "itl" in stats.phase_quantiles and "tpot" not in stats.phase_quantiles
    assert 0.0 < stats.phase_quantiles["itl"][0.5] <= 0.025
    assert stats.kv_cache_usage == 0.125
    assert stats.prefix_cache_hit_ratio is not None and 0 < stats.prefix_cache_hit_ratio < 1
    assert stats.missing_families == (TPOT,)


def _double(line: str) -> str:
    if line.startswith("#") or "_created" in line or "gpu_cache_usage" in line or "num_requests" in line:
        return line
    head, value = line.rsplit(" ", 1)
    return f"{head} {float(value) * 2}"


@pytest.mark.parametrize("page", sorted(FIXTURES.glob("vllm-*/metrics.txt")), ids=lambda p: p.parent.name)
def test_each_committed_page_lacks_what_the_version_table_says(page: Path) -> None:
    snap = snapshot_from_text("t", "fast", page.read_text(), 1.0, 0.01)
    assert snap.up, snap.error
    assert missing_families(snap.families) == EXPECTED_MISSING.get(page.parent.name, ())
    # Speculative decoding is off on every page: its families are absent but not reported.
    assert names.VLLM_SPEC_DECODE_NUM_DRAFT_TOKENS_TOTAL not in snap.families


def test_missing_and_renamed_families_are_logged_once_per_target() -> None:
    notices = FamilyNotices()
    first = notices.notices(old_snapshot())
    missing = [n for n in first if "exposes no" in n]
    renamed = [n for n in first if "older name" in n and "exposes no" not in n]
    assert len(missing) == 1 and TPOT in missing[0] and names.SCRAPE_MISSING_FAMILIES in missing[0]
    assert len(renamed) == len(names.VLLM_LEGACY_ALIASES)
    assert any("vllm:gpu_cache_usage_perc as vllm:kv_cache_usage_perc" in n for n in renamed)
    assert notices.notices(old_snapshot()) == []  # the same target again: nothing new
    assert len(notices.notices(old_snapshot(target="other"))) == len(first)  # another target: its own
    down = ServerSnapshot("third", "fast", 1.0, 0.01, error="timeout")
    assert notices.notices(down) == []  # a failed scrape says nothing about families


def test_missing_families_ignores_optional_features_and_keeps_the_read_order() -> None:
    present = set(names.VLLM_READ_FAMILIES) - {names.VLLM_KV_CACHE_USAGE_PERC, TPOT}
    present -= names.VLLM_OPTIONAL_FAMILIES
    assert missing_families(present) == (names.VLLM_KV_CACHE_USAGE_PERC, TPOT)
    assert missing_families(names.VLLM_READ_FAMILIES) == ()
