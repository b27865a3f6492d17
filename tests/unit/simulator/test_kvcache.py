"""Paged KV cache accounting and prefix sharing."""

from __future__ import annotations

from lanewatch.simulator.kvcache import KVCache, block_hashes


def test_block_hashes_chain_on_the_prefix() -> None:
    a = block_hashes(list(range(40)), 16)
    b = block_hashes([*range(16), 999, *range(17, 40)], 16)
    assert len(a) == 2  # the partial third block is not hashed
    assert a[0] == b[0] and a[1] != b[1]


def test_shared_blocks_are_counted_once_and_cached_after_free() -> None:
    kv = KVCache(num_blocks=10, block_size=4)
    hashes = block_hashes(list(range(8)), 4)
    assert kv.start("a", [], 9)  # 3 blocks
    kv.publish("a", hashes)
    assert kv.used == 3
    assert kv.lookup(hashes) == 2
    assert kv.start("b", hashes, 9)  # shares 2, adds 1 private
    assert kv.used == 4
    kv.free("a")
    kv.free("b")
    assert kv.used == 0 and kv.cached_blocks == 2 and kv.usage == 0.0
    assert kv.lookup(hashes) == 2


def test_full_cache_refuses_and_evicts_cached_blocks_first() -> None:
    kv = KVCache(num_blocks=4, block_size=4)
    hashes = block_hashes(list(range(16)), 4)
    assert kv.start("a", [], 16)
    kv.publish("a", hashes)
    kv.free("a")
    assert kv.cached_blocks == 4
    assert kv.start("b", [], 12)  # needs 3: evicts 3 cached blocks
    assert kv.cached_blocks == 1
    assert not kv.grow("b", 20)  # 5 blocks > 4
    assert kv.grow("b", 16)
    assert kv.used == 4 and kv.cached_blocks == 0
