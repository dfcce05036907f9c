"""The reference model's KV judge: which blocks of the prompt KV a P/D decode holds differ
from what an aggregated run computed.

Equal tokens prove little with seeded random weights (a wrong block can leave
the greedy choice unchanged); the K and V themselves must be bit-identical, since prefill
and aggregated run the same code on the same prompt. Each side reports
``disagg.kv_digest`` (``return_kv_digest: true``): per model KV head it holds, a SHA-256
per prompt block (:meth:`PagedKVCache.digest`); heads held by both sides are compared
(a tensor-parallel rank 0 reports only its own heads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Digest = Mapping[str, Sequence[str]]  # model KV head → one hash per prompt block


def kv_mismatches(got: Digest, want: Digest) -> list[tuple[int, int]]:
    """(head, block index) of every prompt block whose KV differs, over the heads both
    sides hold; a head whose block count differs is all mismatches. Raises ValueError
    when the sides share no head (nothing would be compared)."""
    common = sorted(set(got) & set(want), key=int)
    if not common:
        raise ValueError(f"no KV head in common: {sorted(got)} vs {sorted(want)}")
    bad = []
    for head in common:
        mine, theirs = list(got[head]), list(want[head])
        blocks = max(len(mine), len(theirs))
        if len(mine) != len(theirs):
            bad += [(int(head), b) for b in range(blocks)]
            continue
        bad += [(int(head), b) for b, (x, y) in enumerate(zip(mine, theirs, strict=True)) if x != y]
    return bad
