"""Tensor-parallel ranks and the KV heads they hold: who reads which heads from whom.

A model with ``H`` KV heads served at tensor-parallel size ``T`` splits its
heads as vLLM does: ``T <= H`` gives rank ``r`` the ``H/T`` heads
``[r·H/T, (r+1)·H/T)``; ``T > H`` gives every rank one head, ``r·H // T``, each head
replicated on ``T/H`` ranks. Prefill and decode may run different ``T``: each decode rank
reads exactly the heads it serves, every head from one prefill rank that holds it
(:func:`sources`; replicas spread over the reading ranks), each into the region of its
own cache that holds that head. A cache with one region per KV head
(:attr:`KVLayout.per_head_regions`) makes that a region-to-region copy, so a run of
contiguous blocks is still one descriptor per head.
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_contract.presets import check_tp

__all__ = ["Source", "check_tp", "rank_heads", "sources"]


def rank_heads(rank: int, tp: int, kv_heads: int) -> tuple[int, ...]:
    """The model's KV heads rank ``rank`` of ``tp`` holds, in its cache's order."""
    problem = check_tp(tp, kv_heads)
    if problem is not None:
        raise ValueError(problem)
    if not 0 <= rank < tp:
        raise ValueError(f"rank {rank} is not in [0, {tp})")
    if tp <= kv_heads:
        per = kv_heads // tp
        return tuple(range(rank * per, (rank + 1) * per))
    return (rank * kv_heads // tp,)


@dataclass(frozen=True)
class Source:
    """One remote rank to read from: ``regions`` pairs (local region, remote region)."""

    rank: int
    regions: tuple[tuple[int, int], ...]


def sources(rank: int, tp: int, remote_tp: int, kv_heads: int) -> tuple[Source, ...]:
    """Where rank ``rank`` of ``tp`` reads each of its heads from, among ``remote_tp``
    ranks: one source per remote rank used, in rank order. A head replicated on several
    remote ranks is read from the one at ``rank`` modulo the replicas, so readers of one
    head spread over its replicas (equal TP sizes map every rank to itself)."""
    wanted: dict[int, list[tuple[int, int]]] = {}
    for local, head in enumerate(rank_heads(rank, tp, kv_heads)):
        holders = [p for p in range(remote_tp) if head in rank_heads(p, remote_tp, kv_heads)]
        chosen = holders[rank % len(holders)]
        remote = rank_heads(chosen, remote_tp, kv_heads).index(head)
        wanted.setdefault(chosen, []).append((local, remote))
    return tuple(Source(p, tuple(pairs)) for p, pairs in sorted(wanted.items()))
