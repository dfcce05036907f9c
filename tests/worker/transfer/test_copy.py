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


class LateCopies:
    """A stand-in for CUDA's asynchronous copies (no GPU here): what ``copy_into`` writes and
    the host tensor ``move`` returns hold the data only once ``wait`` is called, as a
    non_blocking copy on a CUDA stream lands only by the next synchronisation. The order of
    calls is kept."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []

    def copy_into(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        self.calls.append("copy_into")
        self._pending.append((dst, src))

    def move(self, t: torch.Tensor, device: torch.device) -> torch.Tensor:
        self.calls.append("move")
        landed = torch.zeros_like(t, device=device)
        self._pending.append((landed, t))
        return landed

    def wait(self) -> None:
        self.calls.append("wait")
        for landed, t in self._pending:
            landed.copy_(t)
        self._pending.clear()


def test_host_scatter_waits_for_the_device_copy_it_reads_gpu_stand_in() -> None:
    # more runs than slice copies take: the gather, move, scatter path
    src_ids, dst_ids = list(range(0, 36, 2)), list(range(18))
    src, dst = regions(), [torch.zeros(40, 3, 4) for _ in range(2)]
    copies = LateCopies()
    copy_blocks(src, dst, src_ids, dst_ids, copies=copies)
    for s, d in zip(src, dst, strict=True):
        assert torch.equal(d[dst_ids], s[src_ids])  # zeros if scattered before the copy landed
    assert copies.calls == ["move", "wait"] * 2 + ["wait"]


def test_slice_copies_have_landed_when_it_returns_gpu_stand_in() -> None:
    src, dst = regions(), [torch.zeros(40, 3, 4) for _ in range(2)]
    copies = LateCopies()
    copy_blocks(src, dst, [1, 2, 3, 20], [10, 11, 12, 0], copies=copies)
    assert copies.calls == ["copy_into"] * 4 + ["wait"]  # two runs per region, one wait
    for s, d in zip(src, dst, strict=True):
        assert torch.equal(d[[10, 11, 12, 0]], s[[1, 2, 3, 20]])
