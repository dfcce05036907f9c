"""Staging copies by block index (CPU tensors here; the CUDA ones: test_cuda_transfer.py)."""

from __future__ import annotations

import pytest
import torch

from disagg_worker.transfer.copy import alloc_staging, copy_blocks, needs_copy


def regions(n: int = 2, blocks: int = 40) -> list[torch.Tensor]:
    return [torch.randn(blocks, 3, 4) for _ in range(n)]


@pytest.mark.parametrize(
    ("src_ids", "dst_ids"),
    [
        ([1, 2, 3], [10, 11, 12]),  # one run: slice copies
        ([5, 9, 2, 30], [0, 1, 2, 3]),  # a few runs
        (list(range(0, 36, 2)), list(range(18))),  # many runs: gather / scatter
    ],
)
def test_copy_blocks_moves_exactly_the_listed_blocks(src_ids, dst_ids) -> None:
    src, dst = regions(), [torch.zeros(40, 3, 4) for _ in range(2)]
    copy_blocks(src, dst, src_ids, dst_ids)
    for s, d in zip(src, dst, strict=True):
        assert torch.equal(d[dst_ids], s[src_ids])
        rest = [b for b in range(40) if b not in dst_ids]
        assert not d[rest].any()


def test_same_ids_when_dst_ids_omitted() -> None:
    src, dst = regions(1), [torch.zeros(40, 3, 4)]
    copy_blocks(src, dst, [7, 8])
    assert torch.equal(dst[0][[7, 8]], src[0][[7, 8]])


def test_cpu_path_registers_the_cache_itself() -> None:
    cache = regions()
    assert not needs_copy(cache, cache)
    staging = alloc_staging(cache)
    assert needs_copy(cache, staging)
    assert [t.shape for t in staging] == [t.shape for t in cache]


def test_region_count_mismatch_is_refused() -> None:
    with pytest.raises(ValueError, match="2 source regions but 1 destination"):
        copy_blocks(regions(), regions(1), [0])
