"""Tensor-parallel ranks: which KV heads each rank holds (vLLM's split), and where a rank
of one TP size reads each of its heads among the ranks of another."""

from __future__ import annotations

import pytest

from disagg_worker.transfer.rules.ranks import check_tp, rank_heads, sources


def test_heads_split_evenly_then_replicate() -> None:
    assert [rank_heads(r, 2, 8) for r in range(2)] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert [rank_heads(r, 4, 2) for r in range(4)] == [(0,), (0,), (1,), (1,)]
    assert rank_heads(0, 1, 2) == (0, 1)


@pytest.mark.parametrize(
    ("tp", "kv", "q", "why"),
    [
        (3, 2, None, "3 ranks do not replicate 2 KV heads evenly"),
        (3, 8, None, "8 KV heads do not split over 3 ranks"),
        (6, 4, None, "6 ranks do not replicate 4 KV heads evenly"),
        (16, 2, 8, "8 attention heads do not split over 16 ranks"),
        (0, 2, None, "tensor-parallel size 0 must be at least 1"),
    ],
)
def test_uneven_splits_are_named(tp: int, kv: int, q: int | None, why: str) -> None:
    assert check_tp(tp, kv, q) == why
    if tp >= 1 and q is None:
        with pytest.raises(ValueError, match=why):
            rank_heads(0, tp, kv)


@pytest.mark.parametrize(
    ("prefill", "decode", "kv"),
    [
        (1, 2, 2),
        (2, 1, 2),
        (2, 2, 2),
        (4, 1, 2),
        (1, 4, 2),
        (4, 4, 2),
        (8, 2, 2),
        (2, 8, 2),
        (2, 4, 8),
        (8, 1, 8),
    ],
)
def test_every_rank_reads_each_of_its_heads_once_from_a_rank_holding_it(
    prefill: int, decode: int, kv: int
) -> None:
    for rank in range(decode):
        mine = rank_heads(rank, decode, kv)
        got = []
        for src in sources(rank, decode, prefill, kv):
            theirs = rank_heads(src.rank, prefill, kv)
            got += [(mine[local], theirs[remote]) for local, remote in src.regions]
        assert sorted(got) == [(h, h) for h in mine]
        # each local region is written once
        assert sorted(
            local for s in sources(rank, decode, prefill, kv) for local, _ in s.regions
        ) == list(range(len(mine)))


def test_equal_sizes_map_rank_to_rank_and_replicas_spread() -> None:
    for tp in (1, 2, 4, 8):
        for rank in range(tp):
            (only,) = sources(rank, tp, tp, 2)
            assert only.rank == rank
            assert only.regions == tuple((i, i) for i in range(len(rank_heads(rank, tp, 2))))
    # decode TP 1 from prefill TP 4 (heads 0, 0, 1, 1): head 0 from rank 0, head 1 from
    # rank 2; decode TP 2 from prefill TP 8: rank 1 reads head 1 from rank 5 (its replica)
    assert [(s.rank, s.regions) for s in sources(0, 1, 4, 2)] == [(0, ((0, 0),)), (2, ((1, 0),))]
    assert [s.rank for s in sources(1, 2, 8, 2)] == [5]
