"""Paged KV cache and block allocator: block tables map positions to the right slots."""

from __future__ import annotations

import threading

import pytest
import torch

from disagg_worker.model.kvcache import BlockAllocator, CacheFullError, PagedKVCache
from disagg_worker.transfer.rules.layout import KVLayout


def _layout(num_blocks: int = 8, block_size: int = 4) -> KVLayout:
    return KVLayout(
        num_layers=2,
        num_kv_heads=2,
        head_dim=3,
        block_size=block_size,
        num_blocks=num_blocks,
        dtype="float32",
        per_head_regions=True,
    )


def test_allocator_hands_out_lowest_ids_and_takes_them_back() -> None:
    alloc = BlockAllocator(4)
    assert alloc.allocate(2) == [0, 1]
    assert alloc.allocate(1) == [2]
    alloc.free([0])
    assert alloc.allocate(2) == [0, 3]
    assert (alloc.num_used, alloc.num_free) == (4, 0)


def test_allocator_full_names_the_setting_to_raise() -> None:
    alloc = BlockAllocator(3)
    alloc.allocate(2)
    with pytest.raises(CacheFullError, match=r"need 2 blocks, 1 of 3 free.*DISAGG_NUM_BLOCKS"):
        alloc.allocate(2)
    assert alloc.num_free == 1  # a refused request takes nothing


def test_allocator_refuses_double_free() -> None:
    alloc = BlockAllocator(3)
    ids = alloc.allocate(2)
    alloc.free(ids)
    with pytest.raises(ValueError, match=r"blocks \[0, 1\] are not allocated"):
        alloc.free(ids)


def test_allocator_is_consistent_under_concurrent_free() -> None:
    alloc = BlockAllocator(400)
    tables = [alloc.allocate(4) for _ in range(100)]
    threads = [threading.Thread(target=alloc.free, args=(t,)) for t in tables]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (alloc.num_used, alloc.num_free) == (0, 400)
    assert sorted(alloc.allocate(400)) == list(range(400))


def test_cache_is_a_block_major_region_per_kv_head() -> None:
    layout = _layout()
    cache = PagedKVCache(layout)
    assert layout.region_shape() == (8, 2, 2, 4, 3)  # blocks, layers, K/V, tokens, dim
    assert tuple(cache.tensor.shape) == (2, *layout.region_shape())
    assert [r.numel() * 4 for r in cache.regions] == [layout.region_len] * 2
    # each region is its head's slice of the one tensor, contiguous (registered as is)
    assert [r.data_ptr() for r in cache.regions] == [
        cache.tensor.data_ptr() + h * layout.region_len for h in range(2)
    ]
    assert all(r.is_contiguous() for r in cache.regions)


def test_write_then_read_follows_the_block_table_across_boundaries() -> None:
    cache = PagedKVCache(_layout())
    table = [5, 2, 7]  # scattered on purpose
    keys = torch.arange(10 * 6, dtype=torch.float32).view(10, 2, 3)
    cache.write(1, table, 0, keys[:6], -keys[:6])
    cache.write(1, table, 6, keys[6:], -keys[6:])  # continues mid-block
    k, v = cache.read(1, table, 10)
    assert torch.equal(k, keys) and torch.equal(v, -keys)
    # position 5 → second table entry (block 2), offset 1, in each head's region; layer 0
    # untouched
    for head in range(2):
        assert torch.equal(cache.regions[head][2, 1, 0, 1], keys[5, head])
        assert torch.equal(cache.regions[head][2, 1, 1, 1], -keys[5, head])
    assert not cache.tensor[:, :, 0].any()


def test_positions_beyond_the_table_are_refused() -> None:
    cache = PagedKVCache(_layout())
    with pytest.raises(ValueError, match="block table has 1 blocks"):
        cache.write(0, [0], 3, torch.zeros(2, 2, 3), torch.zeros(2, 2, 3))
    with pytest.raises(ValueError, match="block table has 1 blocks"):
        cache.read(0, [0], 5)


def test_layouts_without_a_region_per_head_are_refused() -> None:
    layout = _layout().model_copy(update={"per_head_regions": False})
    with pytest.raises(ValueError, match="per_head_regions"):
        PagedKVCache(layout)
    with pytest.raises(ValueError, match="per_head_regions needs block_major"):
        KVLayout.model_validate(
            {**layout.model_dump(), "per_head_regions": True, "block_major": False}
        )
