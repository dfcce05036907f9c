"""The router's reading of vLLM's KV events, judged by vLLM's own classes (no server):
its ``KVEventBatch`` structs encoded as its publisher encodes them, its ``hash_block_tokens``
rooted as ``init_none_hash`` roots it, and the rendered ``--kv-events-config`` parsed by
its CLI into its ``KVEventsConfig``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.engines.vllm import kv_events as render_events
from disagg_operator.render.objects import render
from disagg_worker.serve.proxy.rules import kv_events as kv

pytestmark = pytest.mark.vllm
ROOT = Path(__file__).resolve().parents[2]


def _frames(batch: Any) -> list[bytes]:
    import msgspec

    return [b"kv@x@m", (7).to_bytes(8, "big"), msgspec.msgpack.Encoder().encode(batch)]


def test_vllms_own_batches_decode() -> None:
    from vllm.distributed.kv_events import (
        AllBlocksCleared,
        BlockRemoved,
        BlockStored,
        KVEventBatch,
    )

    full = bytes(range(32))
    stored = BlockStored(block_hashes=[full, 5], parent_block_hash=None, token_ids=[1] * 32,
                         block_size=16, lora_id=None, medium="GPU", lora_name=None,
                         extra_keys=[None, None], group_idx=0)  # fmt: skip
    removed = BlockRemoved(block_hashes=[5], medium="CPU")
    batch = KVEventBatch(ts=1.5, events=[stored, removed, AllBlocksCleared()],
                         data_parallel_rank=1)  # fmt: skip
    got = kv.decode_batch(_frames(batch))
    assert (got.seq, got.dp_rank) == (7, 1)
    first, second, third = got.events
    assert isinstance(first, kv.Stored) and first.hashes == (kv.external(full), 5)
    assert (first.block_size, first.medium, first.first) == (16, "GPU", True)
    assert first.tokens == (1,) * 32
    assert second == kv.Removed((5,), "CPU")
    assert third == kv.Cleared()


@pytest.mark.parametrize("algo", kv.HASH_ALGOS)
@pytest.mark.parametrize("seed", [None, "0", "42"])
def test_hash_chain_is_vllms(algo: str, seed: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils as utils

    if seed is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
    hash_fn = get_hash_fn_by_name(algo)
    utils.init_none_hash(hash_fn)
    tokens = [(i * 37) % 1000 for i in range(100)]
    parent, want = None, []
    for start in range(0, 96, 32):
        parent = utils.hash_block_tokens(hash_fn, parent, tokens[start : start + 32], None)
        want.append(utils.maybe_convert_block_hash(parent))
    assert kv.Hashing(algo, seed, 32).chain(tokens) == [kv.external(h) for h in want]


def test_the_rendered_publisher_is_what_vllm_parses(serve_parser: Any) -> None:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "kv-events.yaml").read_text())
    body["metadata"].update(namespace="default", uid="u")
    pods = [o for o in render(body, hmac_key="k" * 32) if o["kind"] == "Pod"]
    for pod in pods:
        engine = pod["spec"]["containers"][0]
        _, engine_args = serve_parser.parse(engine["command"])
        config = engine_args.kv_events_config
        assert (config.enable_kv_cache_events, config.publisher) == (True, "zmq")
        assert config.endpoint == f"tcp://*:{render_events.EVENTS_PORT}"
        assert config.topic.startswith(render_events.TOPIC_PREFIX)
        assert engine_args.prefix_caching_hash_algo == render_events.HASH_ALGO
        assert engine_args.block_size == 32
