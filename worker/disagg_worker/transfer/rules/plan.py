"""Transfer planning: block ids on both sides → the descriptors one READ posts.

numpy for index arrays, nothing else. The executor in ``transfer`` consumes the frozen
:class:`TransferPlan`.

A *run* is a stretch of blocks contiguous on BOTH sides (local ids i, i+1, ... read from
remote ids j, j+1, ...). Merged mode posts one descriptor per run per region; per-block
mode (what vLLM's NixlConnector posts) one descriptor per block per region. For R regions,
B blocks in k runs: merged = k·R descriptors, per-block = B·R. A plan reads remote
regions into local ones in pairs (``regions``): the same index on both sides when the
peers hold the same KV heads, a head's region into the region that holds it here when
they split heads differently (tensor parallelism of another size, :mod:`ranks`).

Descriptor order is region-major, then run, then block, so that in the prepared per-block
descriptor lists (index = region · num_blocks + block) consecutive indices of one run are
adjacent in memory on both sides and NIXL can coalesce them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Desc = tuple[int, int, int]  # (address, length, device id), NIXL's transfer descriptor
IndexArray = npt.NDArray[np.int32]


class PlanError(ValueError):
    """Block ids that cannot be transferred; the message names the offending id."""


@dataclass(frozen=True)
class Run:
    """``count`` blocks: local ``local..local+count`` ← remote ``remote..remote+count``."""

    local: int
    remote: int
    count: int


def block_runs(
    local_ids: Sequence[int], remote_ids: Sequence[int], *, merge: bool = True
) -> tuple[Run, ...]:
    """Pair block ids in order; merge neighbours contiguous on both sides when ``merge``."""
    if len(local_ids) != len(remote_ids):
        raise PlanError(
            f"{len(local_ids)} local block ids but {len(remote_ids)} remote block ids; "
            "pass one local block per remote block"
        )
    runs: list[Run] = []
    for lo, re in zip(local_ids, remote_ids, strict=True):
        last = runs[-1] if runs else None
        if (
            merge
            and last is not None
            and lo == last.local + last.count
            and re == last.remote + last.count
        ):
            runs[-1] = Run(last.local, last.remote, last.count + 1)
        else:
            runs.append(Run(lo, re, 1))
    return tuple(runs)


def _check_ids(ids: Sequence[int], num_blocks: int, side: str) -> None:
    for b in ids:
        if not 0 <= b < num_blocks:
            raise PlanError(f"{side} block id {b} out of range [0, {num_blocks})")
    if len(set(ids)) != len(ids):
        raise PlanError(f"{side} block ids repeat a block: {sorted(ids)}")


@dataclass(frozen=True)
class TransferPlan:
    """Runs x region pairs; everything the executor needs besides the NIXL handles."""

    runs: tuple[Run, ...]
    regions: tuple[tuple[int, int], ...]  # (local region, remote region), in posting order
    block_len: int
    local_num_blocks: int
    remote_num_blocks: int

    @property
    def num_regions(self) -> int:
        return len(self.regions)

    @property
    def num_blocks(self) -> int:
        return sum(r.count for r in self.runs)

    @property
    def descriptors(self) -> int:
        return len(self.runs) * self.num_regions

    @property
    def bytes(self) -> int:
        return self.num_blocks * self.block_len * self.num_regions

    def local_descs(self, bases: Sequence[int], device_id: int = 0) -> list[Desc]:
        """One (address, length, device) per run per region, into the local regions."""
        return self._descs(bases, device_id, local=True)

    def remote_descs(self, bases: Sequence[int], device_id: int = 0) -> list[Desc]:
        return self._descs(bases, device_id, local=False)

    def _descs(self, bases: Sequence[int], device_id: int, *, local: bool) -> list[Desc]:
        side = [pair[0 if local else 1] for pair in self.regions]
        if any(not 0 <= i < len(bases) for i in side):
            raise PlanError(f"{len(bases)} region addresses for regions {side}")
        bl = self.block_len
        return [
            (bases[i] + (r.local if local else r.remote) * bl, r.count * bl, device_id)
            for i in side
            for r in self.runs
        ]

    def local_indices(self) -> IndexArray:
        """Indices into the prepared per-block local list (region · num_blocks + block)."""
        return self._indices(self.local_num_blocks, local=True)

    def remote_indices(self) -> IndexArray:
        return self._indices(self.remote_num_blocks, local=False)

    def _indices(self, num_blocks: int, *, local: bool) -> IndexArray:
        starts = np.array([r.local if local else r.remote for r in self.runs], dtype=np.int64)
        counts = np.array([r.count for r in self.runs], dtype=np.int64)
        # block ids of all runs, in run order: start repeated count times + offset in run
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        blocks = np.repeat(starts, counts) + offsets
        side = [pair[0 if local else 1] for pair in self.regions]
        regions = np.array(side, dtype=np.int64)[:, None] * num_blocks
        return (regions + blocks[None, :]).reshape(-1).astype(np.int32)


def split_indices(
    local: IndexArray, remote: IndexArray, parts: int
) -> list[tuple[IndexArray, IndexArray]]:
    """Cut the paired index arrays into at most ``parts`` nearly equal, non-empty slices
    (to post one READ per worker thread; NIXL still coalesces inside each slice)."""
    if len(local) != len(remote):
        raise PlanError(f"{len(local)} local indices but {len(remote)} remote indices")
    n = max(1, min(parts, len(local)))
    bounds = [len(local) * i // n for i in range(n + 1)]
    return [(local[a:b], remote[a:b]) for a, b in itertools.pairwise(bounds) if b > a]


def plan_read(
    *,
    regions: int | Sequence[tuple[int, int]],
    block_len: int,
    local_num_blocks: int,
    remote_num_blocks: int,
    local_ids: Sequence[int],
    remote_ids: Sequence[int],
    merge: bool = True,
) -> TransferPlan:
    """Validate ids against both caches and build the plan (layouts already matched).
    ``regions``: (local, remote) region pairs, or a count R for the pairs (i, i), i < R."""
    _check_ids(local_ids, local_num_blocks, "local")
    _check_ids(remote_ids, remote_num_blocks, "remote")
    pairs = tuple((i, i) for i in range(regions)) if isinstance(regions, int) else tuple(regions)
    if not pairs:
        raise PlanError("no regions to read; a plan needs at least one (local, remote) pair")
    return TransferPlan(
        runs=block_runs(local_ids, remote_ids, merge=merge),
        regions=pairs,
        block_len=block_len,
        local_num_blocks=local_num_blocks,
        remote_num_blocks=remote_num_blocks,
    )
