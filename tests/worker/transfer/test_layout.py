"""KV layout geometry, compatibility fields and JSON round trip."""

from __future__ import annotations

from disagg_worker.transfer.rules.layout import KVLayout

LLAMA = dict(num_layers=32, num_kv_heads=8, head_dim=128, block_size=16, num_blocks=64)


def test_llama3_8b_is_128_kib_per_token_in_both_layouts() -> None:
    bm = KVLayout(**LLAMA)  # type: ignore[arg-type]
    lm = KVLayout(**LLAMA, block_major=False)  # type: ignore[arg-type]
    assert bm.bytes_per_token == lm.bytes_per_token == 128 * 1024
    assert (bm.num_regions, bm.block_len) == (1, 2 * 1024 * 1024)
    assert (lm.num_regions, lm.block_len) == (64, 32 * 1024)
    assert bm.region_shape() == (64, 32, 2, 16, 8, 128)
    assert lm.region_shape() == (64, 16, 8, 128)
    assert KVLayout(**LLAMA, block_major=False, layout="HND").region_shape() == (64, 8, 16, 128)  # type: ignore[arg-type]


def test_num_blocks_is_not_a_compatibility_field() -> None:
    a = KVLayout(**LLAMA)  # type: ignore[arg-type]
    assert a.compat_hash() == a.model_copy(update={"num_blocks": 7}).compat_hash()
    assert a.mismatches(a.model_copy(update={"block_size": 32, "layout": "HND"})) == [
        "block_size 16 != 32",
        "layout NHD != HND",
    ]


def test_layout_round_trips_through_json() -> None:
    a = KVLayout(**LLAMA, block_major=False)  # type: ignore[arg-type]
    assert KVLayout.model_validate_json(a.model_dump_json()) == a


def test_a_region_per_head_keeps_a_run_of_blocks_one_descriptor_per_head() -> None:
    per_head = KVLayout(**LLAMA, per_head_regions=True)  # type: ignore[arg-type]
    assert per_head.num_regions == 8  # LLAMA's KV heads
    assert per_head.region_shape() == (64, 32, 2, 16, 128)  # blocks, layers, K/V, tokens, dim
    assert per_head.block_len * per_head.num_regions == KVLayout(**LLAMA).block_len  # type: ignore[arg-type]
    # ranks of other TP sizes hold other head counts and still match, heads aside
    half = per_head.model_copy(update={"num_kv_heads": 4})
    assert per_head.mismatches(half) == ["num_kv_heads 8 != 4"]
    assert per_head.mismatches(half, heads=False) == []
    assert per_head.compat_hash(heads=False) == half.compat_hash(heads=False)
    assert per_head.mismatches(KVLayout(**LLAMA), heads=False) == ["per_head_regions True != False"]  # type: ignore[arg-type]
