"""Block copies between a device KV cache and its host staging buffer.

Effectful layer (torch only). Used when the KV cache lives on an accelerator but NIXL moves
a host (DRAM) buffer, i.e. kv_buffer_device "cpu" on a cuda device: prefill copies a
request's blocks device→host before announcing them, decode copies host→device after the
READ. On a pure-CPU worker the cache itself is registered and nothing is copied
(:func:`needs_copy` is False), which is the path upstream's CPU platform lacked.

Blocks are the first dimension of every region tensor. Contiguous runs are copied as
slices (one memcpy each); fragmented lists fall back to index_select / index_copy_.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from disagg_worker.transfer.layout import KVLayout
from disagg_worker.transfer.plan import block_runs

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "uint8": torch.uint8,
}


# Above this many runs per region a gather/scatter beats a Python loop of slice copies.
_MAX_SLICE_RUNS = 8


def needs_copy(cache: Sequence[torch.Tensor], buffer: Sequence[torch.Tensor]) -> bool:
    """False when the registered buffer IS the cache (same storage): the CPU path."""
    return any(c.data_ptr() != b.data_ptr() for c, b in zip(cache, buffer, strict=True))


def alloc_staging(cache: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Host buffers shaped like ``cache`` (pinned when a GPU is there, for async copies)."""
    pin = torch.cuda.is_available() and any(t.is_cuda for t in cache)
    return [torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=pin) for t in cache]


def copy_blocks(
    src: Sequence[torch.Tensor],
    dst: Sequence[torch.Tensor],
    src_ids: Sequence[int],
    dst_ids: Sequence[int] | None = None,
) -> None:
    """``dst[r][dst_ids[i]] = src[r][src_ids[i]]`` for every region r (any devices)."""
    if len(src) != len(dst):
        raise ValueError(f"{len(src)} source regions but {len(dst)} destination regions")
    dst_ids = list(src_ids) if dst_ids is None else list(dst_ids)
    if not src_ids:
        return
    runs = block_runs(dst_ids, list(src_ids))  # Run.local = dst, Run.remote = src
    for s, d in zip(src, dst, strict=True):
        if len(runs) <= _MAX_SLICE_RUNS:
            for run in runs:
                d[run.local : run.local + run.count].copy_(
                    s[run.remote : run.remote + run.count], non_blocking=True
                )
        else:
            si = torch.as_tensor(list(src_ids), device=s.device)
            di = torch.as_tensor(dst_ids, device=d.device)
            d.index_copy_(0, di, s.index_select(0, si).to(d.device, non_blocking=True))
    if any(t.is_cuda for t in (*src, *dst)):
        torch.cuda.synchronize()


def check_caches(device: str, layout: KVLayout, caches: Sequence[torch.Tensor]) -> None:
    """The tensors match the layout: count, shape, dtype, device (errors name them)."""
    if len(caches) != layout.num_regions:
        raise ValueError(f"caches: {len(caches)} tensors, layout has {layout.num_regions} regions")
    shape, dtype = layout.region_shape(), TORCH_DTYPES[layout.dtype]
    for i, t in enumerate(caches):
        if tuple(t.shape) != shape or t.dtype != dtype:
            raise ValueError(
                f"caches[{i}]: {tuple(t.shape)} {t.dtype}, layout wants {shape} {dtype}"
            )
        if t.device.type != device:
            raise ValueError(f"caches[{i}] is on {t.device.type}, DISAGG_DEVICE is {device}")
