"""KV layout geometry, compatibility fields and JSON round trip."""

from __future__ import annotations

from disagg_worker.transfer.layout import KVLayout

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
