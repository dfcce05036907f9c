"""Block copies between a device KV cache and its host staging buffer.

Effectful layer (torch only). Used when the KV cache lives on an accelerator but NIXL moves
a host (DRAM) buffer, i.e. kv_buffer_device "cpu" on a cuda device: prefill copies a
request's blocks device→host before announcing them, decode copies host→device after the
READ. On a pure-CPU worker the cache itself is registered and nothing is copied
(:func:`needs_copy` is False), which is the path upstream's CPU platform lacked.

Blocks are the first dimension of every region tensor. Contiguous runs are copied as
slices (one memcpy each); fragmented lists fall back to index_select / index_copy_. CUDA
copies are asynchronous: a host-side scatter waits for the device→host copy it reads, and
every copy has landed when :func:`copy_blocks` returns (:class:`Copies` is the seam the
tests observe that order through).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.rules.plan import block_runs

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


class Copies(Protocol):
    """How tensors move between devices. ``copy_into`` and ``move`` may return before the
    data lands (CUDA copies with non_blocking); ``wait`` returns once every copy issued so
    far has landed."""

    def copy_into(self, dst: torch.Tensor, src: torch.Tensor) -> None: ...

    def move(self, t: torch.Tensor, device: torch.device) -> torch.Tensor: ...

    def wait(self) -> None: ...


class TorchCopies:
    """torch's copies: asynchronous on CUDA streams, waited for with a device sync (a
    no-op when no CUDA tensor moved)."""

    def __init__(self) -> None:
        self._cuda = False

    def copy_into(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        self._cuda = self._cuda or dst.is_cuda or src.is_cuda
        dst.copy_(src, non_blocking=True)

    def move(self, t: torch.Tensor, device: torch.device) -> torch.Tensor:
        self._cuda = self._cuda or t.is_cuda or device.type == "cuda"
        return t.to(device, non_blocking=True)

    def wait(self) -> None:
        if self._cuda:
            torch.cuda.synchronize()
            self._cuda = False


def copy_blocks(
    src: Sequence[torch.Tensor],
    dst: Sequence[torch.Tensor],
    src_ids: Sequence[int],
    dst_ids: Sequence[int] | None = None,
    copies: Copies | None = None,
) -> None:
    """``dst[r][dst_ids[i]] = src[r][src_ids[i]]`` for every region r (any devices); every
    block has landed when it returns."""
    if len(src) != len(dst):
        raise ValueError(f"{len(src)} source regions but {len(dst)} destination regions")
    copies = copies or TorchCopies()
    dst_ids = list(src_ids) if dst_ids is None else list(dst_ids)
    if not src_ids:
        return
    runs = block_runs(dst_ids, list(src_ids))  # Run.local = dst, Run.remote = src
    for s, d in zip(src, dst, strict=True):
        if len(runs) <= _MAX_SLICE_RUNS:
            for run in runs:  # copied in place, stream-ordered: one wait at the end
                copies.copy_into(
                    d[run.local : run.local + run.count], s[run.remote : run.remote + run.count]
                )
            continue
        si = torch.as_tensor(list(src_ids), device=s.device)
        di = torch.as_tensor(dst_ids, device=d.device)
        moved = copies.move(s.index_select(0, si), d.device)
        if d.device.type == "cpu":
            # a host scatter reads ``moved`` at once, not in a stream's order: a device→host
            # copy must have landed first (on CUDA, index_copy_ would read pinned memory the
            # copy engine is still writing)
            copies.wait()
        d.index_copy_(0, di, moved)
    copies.wait()


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
