"""Transfer planner: runs merge only where both sides are contiguous; ids are checked."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from disagg_worker.transfer.rules.plan import PlanError, Run, block_runs, plan_read, split_indices


def _plan(local, remote, *, regions=2, merge=True, nl=16, nr=16):
    return plan_read(
        regions=regions,
        block_len=100,
        local_num_blocks=nl,
        remote_num_blocks=nr,
        local_ids=local,
        remote_ids=remote,
        merge=merge,
    )


def test_runs_merge_only_when_both_sides_are_contiguous() -> None:
    runs = block_runs([0, 1, 2, 5, 6, 9], [3, 4, 8, 9, 10, 0])
    assert runs == (Run(0, 3, 2), Run(2, 8, 1), Run(5, 9, 2), Run(9, 0, 1))


def test_per_block_mode_posts_one_run_per_block() -> None:
    assert block_runs([0, 1, 2], [0, 1, 2], merge=False) == (
        Run(0, 0, 1),
        Run(1, 1, 1),
        Run(2, 2, 1),
    )


def test_descriptors_are_region_major_with_addresses_per_side() -> None:
    plan = _plan([0, 1, 7], [4, 5, 2])
    assert plan.descriptors == 4 and plan.bytes == 600
    assert plan.local_descs([1000, 5000]) == [
        (1000, 200, 0),
        (1700, 100, 0),
        (5000, 200, 0),
        (5700, 100, 0),
    ]
    assert plan.remote_descs([0x10000, 0x20000], device_id=3) == [
        (0x10000 + 400, 200, 3),
        (0x10000 + 200, 100, 3),
        (0x20000 + 400, 200, 3),
        (0x20000 + 200, 100, 3),
    ]


def test_prepped_indices_address_the_per_block_lists() -> None:
    plan = _plan([0, 1, 7], [4, 5, 2], nl=8, nr=10)
    assert plan.local_indices().tolist() == [0, 1, 7, 8, 9, 15]
    assert plan.remote_indices().tolist() == [4, 5, 2, 14, 15, 12]


@pytest.mark.parametrize(
    ("local", "remote", "message"),
    [
        ([0, 16], [0, 1], "local block id 16 out of range [0, 16)"),
        ([0, 1], [0, -1], "remote block id -1 out of range [0, 16)"),
        ([3, 3], [0, 1], "local block ids repeat a block"),
        ([0], [0, 1], "1 local block ids but 2 remote block ids"),
    ],
)
def test_bad_ids_are_refused_by_name(local, remote, message) -> None:
    with pytest.raises(PlanError, match=message.replace("[", r"\[").replace(")", r"\)")):
        _plan(local, remote)


@given(
    st.lists(
        st.tuples(st.integers(0, 63), st.integers(0, 63)),
        max_size=40,
        unique_by=(lambda t: t[0], lambda t: t[1]),
    )
)
def test_merged_and_per_block_plans_move_the_same_block_pairs(pairs) -> None:
    local = [p[0] for p in pairs]
    remote = [p[1] for p in pairs]
    merged = _plan(local, remote, nl=64, nr=64)
    single = _plan(local, remote, nl=64, nr=64, merge=False)
    assert merged.local_indices().tolist() == single.local_indices().tolist()
    assert merged.remote_indices().tolist() == single.remote_indices().tolist()
    assert merged.bytes == single.bytes == len(pairs) * 200
    assert merged.descriptors <= single.descriptors == 2 * len(pairs)

    # the byte ranges the merged descriptors cover are exactly the per-block ones
    def covered(descs):
        return sorted((a + i * 100) for a, n, _ in descs for i in range(n // 100))

    assert covered(merged.local_descs([0, 10_000])) == covered(single.local_descs([0, 10_000]))


def test_split_indices_keeps_pairs_and_order() -> None:
    plan = _plan([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    local, remote = plan.local_indices(), plan.remote_indices()
    parts = split_indices(local, remote, 3)
    assert [len(a) for a, _ in parts] == [3, 3, 4]
    assert np.concatenate([a for a, _ in parts]).tolist() == local.tolist()
    assert np.concatenate([b for _, b in parts]).tolist() == remote.tolist()
    assert len(split_indices(local[:2], remote[:2], 8)) == 2  # never an empty part


def test_region_pairs_read_a_remote_head_into_the_local_region_holding_it() -> None:
    """A decode rank holding heads (0, 1) reads head 1 from a prefill rank's region 0: the
    descriptors address local region 1 and remote region 0, a run of blocks in one each."""
    plan = _plan([3, 4, 5], [8, 9, 10], regions=[(1, 0)])
    assert plan.num_regions == 1 and plan.descriptors == 1 and plan.bytes == 300
    assert plan.local_descs([1000, 5000]) == [(5000 + 300, 300, 0)]
    assert plan.remote_descs([9000]) == [(9000 + 800, 300, 0)]
    # prepared-list indices: region · num_blocks + block, on each side's own region
    assert plan.local_indices().tolist() == [16 + 3, 16 + 4, 16 + 5]
    assert plan.remote_indices().tolist() == [8, 9, 10]
    with pytest.raises(PlanError, match=r"1 region addresses for regions \[1\]"):
        plan.local_descs([1000])
    with pytest.raises(PlanError, match="at least one"):
        _plan([0], [0], regions=[])
