"""A paged KV cache with prefix caching, in the shape of vLLM V1's KVCacheManager (pure).

Blocks hold `block_size` tokens. A request holds private blocks plus shared, hashed blocks: the
full blocks of a prompt, each hash chained on the one before, so a hash names a whole prefix.
A hashed block that no request holds any more stays cached (evictable, LRU) until its space is
needed. Usage counts the blocks requests hold; cached-but-unheld blocks count as free, as in
vLLM's `kv_cache_usage_perc`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field


def block_hashes(ids: Sequence[int], block_size: int) -> list[int]:
    """Chained hashes of each full block of `ids`."""
    out: list[int] = []
    prev = 0
    for i in range(0, len(ids) - block_size + 1, block_size):
        prev = hash((prev, tuple(ids[i : i + block_size])))
        out.append(prev)
    return out


def blocks_for(tokens: int, block_size: int) -> int:
    """Blocks that hold `tokens` tokens."""
    return -(-tokens // block_size)


@dataclass
class _Holding:
    shared: list[int] = field(default_factory=list)
    private: int = 0


class KVCache:
    """Block accounting for running requests plus an LRU of cached prefix blocks."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.used = 0
        self._refs: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()
        self._held: dict[str, _Holding] = {}

    @property
    def usage(self) -> float:
        """Fraction of blocks held by requests (0 to 1)."""
        return self.used / self.num_blocks

    @property
    def cached_blocks(self) -> int:
        """Hashed blocks held by no request but kept for reuse."""
        return len(self._evictable)

    def lookup(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of `hashes` are cached (held or evictable)."""
        if not self.prefix_caching:
            return 0
        n = 0
        for h in hashes:
            if h not in self._refs and h not in self._evictable:
                break
            n += 1
        return n

    def start(self, rid: str, hits: Sequence[int], tokens: int) -> bool:
        """Give a new request its cached prefix blocks and room for `tokens`; False if it does not fit."""
        revived = sum(1 for h in hits if h not in self._refs)
        private = blocks_for(tokens, self.block_size) - len(hits)
        if self.used + revived + private > self.num_blocks:
            return False
        for h in hits:
            if h in self._refs:
                self._refs[h] += 1
            else:
                del self._evictable[h]
                self._refs[h] = 1
                self.used += 1
        self._held[rid] = _Holding(list(hits), 0)
        self._take(rid, private)
        return True

    def grow(self, rid: str, tokens: int) -> bool:
        """Make a running request hold room for `tokens`; False if the cache is full."""
        held = self._held[rid]
        need = blocks_for(tokens, self.block_size) - len(held.shared) - held.private
        if need <= 0:
            return True
        if self.used + need > self.num_blocks:
            return False
        self._take(rid, need)
        return True

    def publish(self, rid: str, hashes: Sequence[int]) -> None:
        """Turn a request's computed full prompt blocks into shared, cached ones."""
        if not self.prefix_caching:
            return
        held = self._held[rid]
        for h in hashes[len(held.shared) :]:
            if held.private == 0:
                break
            held.private -= 1
            held.shared.append(h)
            if h in self._refs:  # another request computed the same block meanwhile: share it
                self._refs[h] += 1
                self.used -= 1
            else:
                self._evictable.pop(h, None)
                self._refs[h] = 1

    def free(self, rid: str) -> None:
        """Release every block a request holds; its hashed blocks stay cached."""
        held = self._held.pop(rid, None)
        if held is None:
            return
        self.used -= held.private
        for h in reversed(held.shared):  # the prefix end is evicted first
            self._refs[h] -= 1
            if self._refs[h] == 0:
                del self._refs[h]
                self._evictable[h] = None
                self.used -= 1
        self._evict()

    def _take(self, rid: str, blocks: int) -> None:
        self._held[rid].private += blocks
        self.used += blocks
        self._evict()

    def _evict(self) -> None:
        while len(self._evictable) > self.num_blocks - self.used:
            self._evictable.popitem(last=False)
