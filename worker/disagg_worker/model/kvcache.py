"""Paged KV cache and its block allocator: where the reference model keeps keys and values.

Compute layer (torch, no I/O). The cache is one tensor of shape ``[num_kv_heads, num_blocks,
num_layers, 2, block_size, head_dim]``: a block-major region per KV head this rank holds
(:attr:`KVLayout.per_head_regions`), so the transfer agent registers each head's region as
is and moves a run of blocks as one descriptor per head, whichever heads the reading rank
serves (tensor parallelism of another size). A request owns a *block table*: the list of
block ids that hold its tokens in order; token ``p`` lives in block ``table[p //
block_size]`` at offset ``p % block_size``. The allocator is thread-safe because the
transfer agent frees a prefill's blocks from its own thread when decode's notification or
the lease arrives.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Sequence

import torch

from disagg_worker.transfer.rules.layout import KVLayout


class CacheFullError(RuntimeError):
    """Not enough free blocks for a request; the message says how many were needed."""


class BlockAllocator:
    """Free-list of block ids; lowest ids first so tables stay mostly contiguous.
    ``on_free`` (any thread, outside the lock) hears of every :meth:`free`."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))
        self._used: set[int] = set()
        self._lock = threading.Lock()
        self.on_free: Callable[[], None] | None = None

    def allocate(self, count: int) -> list[int]:
        with self._lock:
            if count > len(self._free):
                raise CacheFullError(
                    f"KV cache full: need {count} blocks, {len(self._free)} of "
                    f"{self.num_blocks} free; raise DISAGG_NUM_BLOCKS or shorten the prompt"
                )
            ids = [self._free.pop() for _ in range(count)]
            self._used.update(ids)
            return ids

    def free(self, ids: Iterable[int]) -> None:
        """Return blocks; freeing a block that is not in use is a bug and raises."""
        with self._lock:
            ids = list(ids)
            stray = [i for i in ids if i not in self._used]
            if stray:
                raise ValueError(f"blocks {stray} are not allocated")
            self._used.difference_update(ids)
            self._free.extend(ids)
            self._free.sort(reverse=True)
        if self.on_free is not None:
            self.on_free()

    @property
    def num_free(self) -> int:
        with self._lock:
            return len(self._free)

    @property
    def num_used(self) -> int:
        with self._lock:
            return len(self._used)


class PagedKVCache:
    """The block-major cache tensor plus the gather/scatter the attention needs."""

    def __init__(self, layout: KVLayout, device: str = "cpu") -> None:
        if not layout.per_head_regions:
            raise ValueError("the reference model needs a layout with per_head_regions")
        self.layout = layout
        dtype = getattr(torch, layout.dtype)
        shape = (layout.num_kv_heads, *layout.region_shape())
        self.tensor = torch.zeros(shape, dtype=dtype, device=device)

    @property
    def regions(self) -> list[torch.Tensor]:
        """The tensors to register with the transfer agent: one per KV head."""
        return list(self.tensor.unbind(0))

    def _slots(self, table: Sequence[int], start: int, count: int) -> tuple[torch.Tensor, ...]:
        size = self.layout.block_size
        pos = torch.arange(start, start + count)
        needed = -(-(start + count) // size)
        if needed > len(table):
            raise ValueError(f"block table has {len(table)} blocks, positions need {needed}")
        blocks = torch.tensor(list(table[:needed]), dtype=torch.long)[pos // size]
        return blocks.to(self.tensor.device), (pos % size).to(self.tensor.device)

    def write(
        self,
        layer: int,
        table: Sequence[int],
        start: int,
        keys: torch.Tensor,
        values: torch.Tensor,
    ) -> None:
        """Store K/V ``[n, kv_heads, head_dim]`` for positions ``start..start+n-1``."""
        blocks, offsets = self._slots(table, start, keys.shape[0])
        self.tensor[:, blocks, layer, 0, offsets] = keys.transpose(0, 1)
        self.tensor[:, blocks, layer, 1, offsets] = values.transpose(0, 1)

    def read(
        self, layer: int, table: Sequence[int], length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V ``[length, kv_heads, head_dim]`` for positions ``0..length-1``."""
        size = self.layout.block_size
        needed = -(-length // size)
        if needed > len(table):
            raise ValueError(f"block table has {len(table)} blocks, {length} tokens need {needed}")
        ids = torch.tensor(list(table[:needed]), dtype=torch.long, device=self.tensor.device)
        kv = self.tensor[:, ids, layer]  # [heads, blocks, 2, block_size, dim]
        heads, dim = kv.shape[0], kv.shape[-1]
        kv = kv.permute(2, 1, 3, 0, 4).reshape(2, needed * size, heads, dim)
        return kv[0, :length], kv[1, :length]

    def digest(self, table: Sequence[int], length: int) -> list[list[str]]:
        """Per KV head this cache holds, per block of ``table``: a SHA-256 (32 hex chars) of
        the K and V of positions ``0..length-1`` it holds, all layers. Positions past
        ``length`` (generated tokens, stale bytes) do not count, so a decode that received
        a prompt's KV and an aggregated run that computed it compare equal block by block
        exactly when their prompt KV is bit-identical."""
        size, out = self.layout.block_size, []
        for head in range(self.layout.num_kv_heads):
            row = []
            for i in range(-(-length // size)):
                used = min(size, length - i * size)
                kv = self.tensor[head, table[i], :, :, :used].contiguous()
                row.append(hashlib.sha256(kv.cpu().numpy().tobytes()).hexdigest()[:32])
            out.append(row)
        return out
