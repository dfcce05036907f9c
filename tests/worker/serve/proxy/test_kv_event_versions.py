"""The router's reader (serve/proxy/rules/kv_events.py) against each vLLM release's event
structs, restated as data from that release's ``vllm/distributed/kv_events.py``: field
order, defaults and msgspec options (array_like until 0.23.0, a tagged map from 0.24.0).
Each struct is rebuilt with msgspec, encoded as vLLM encodes it, and read back."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from disagg_operator.engines.vllm import event_rows
from disagg_worker.serve.proxy.rules import kv_events as kv

# BlockStored's fields in each release, in order ("=" marks a field with a None default)
STORED = {
    (0, 11, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium",
    (0, 15, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name",
    (0, 20, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name "
    "=extra_keys =group_idx",
    (0, 23, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name "
    "=extra_keys =group_idx =kv_cache_spec_kind =kv_cache_spec_sliding_window",
    (0, 24, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name "
    "=extra_keys =group_idx =kv_cache_spec_kind =kv_cache_spec_sliding_window",
    (0, 29, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name "
    "=extra_keys =group_idx =kv_cache_spec_kind =kv_cache_spec_sliding_window =locality "
    "=ownership",
    (0, 32, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name "
    "=extra_keys =group_idx =kv_cache_spec_kind =kv_cache_spec_sliding_window =locality "
    "=ownership =session_id",
    (0, 33, 0): "block_hashes parent_block_hash token_ids block_size lora_id medium lora_name "
    "=extra_keys =group_idx =kv_cache_spec_kind =kv_cache_spec_sliding_window =locality "
    "=ownership =session_id =lookahead_token_ids",
}
REMOVED = {
    (0, 11, 0): "block_hashes medium",
    (0, 20, 0): "block_hashes medium =group_idx",
    (0, 29, 0): "block_hashes medium =group_idx =locality =ownership",
}


def _fields(spec: str) -> list[tuple[str, Any] | tuple[str, Any, Any]]:
    return [(n[1:], Any, None) if n.startswith("=") else (n, Any) for n in spec.split()]


def _structs(version: tuple[int, int, int]) -> tuple[Any, Any, Any]:
    """BlockStored, BlockRemoved, AllBlocksCleared as ``version`` declares them."""
    array = event_rows.events_row(version).wire == event_rows.ARRAY  # type: ignore[union-attr]
    opts = {"tag": True, "array_like": array, "omit_defaults": True}
    removed = REMOVED[max(v for v in REMOVED if v <= version)]
    return (
        msgspec.defstruct("BlockStored", _fields(STORED[version]), **opts),
        msgspec.defstruct("BlockRemoved", _fields(removed), **opts),
        msgspec.defstruct("AllBlocksCleared", [], **opts),
    )


@pytest.mark.parametrize("version", sorted(STORED))
def test_each_release_batch_reads_back(version: tuple[int, int, int]) -> None:
    stored_t, removed_t, cleared_t = _structs(version)
    stored = {n: None for n, *_ in _fields(STORED[version])}
    stored.update(block_hashes=[7, 8], token_ids=[1, 2, 3, 4], block_size=2, medium="GPU")
    removed = {n: None for n, *_ in _fields(REMOVED[max(v for v in REMOVED if v <= version)])}
    removed.update(block_hashes=[7], medium="GPU")
    batch = msgspec.defstruct(
        "EventBatch",
        [("ts", float), ("events", list), ("data_parallel_rank", Any, None)],
        array_like=True,
        omit_defaults=True,
    )
    events = [stored_t(**stored), removed_t(**removed), cleared_t()]
    payload = msgspec.msgpack.encode(batch(1.5, events, 1))
    got = kv.decode_batch([b"kv@", (3).to_bytes(8, "big"), payload])
    assert got == kv.Batch(
        3,
        (kv.Stored((7, 8), 2, "GPU", (1, 2, 3, 4), True), kv.Removed((7,), "GPU"), kv.Cleared()),
        1,
    )
    shape = msgspec.msgpack.decode(payload)[1][0]
    assert isinstance(shape, list if event_rows.events_row(version).wire == event_rows.ARRAY
                      else dict)  # fmt: skip
