"""Routing policy: which path a request takes (prefill then decode, or decode alone), and
which decode worker is likely to hold its prompt's prefix.

The policy (``spec.routing``: ``always``, or ``threshold`` on a prompt's non-cached tokens
with an optional prefill queue limit) is rendered as the proxy's flags and as llm-d's
scheduler config, so both routers decide alike. Prefix affinity remembers the chained
hashes of the full prompt blocks sent to each decode (a bounded LRU, as llm-d's approximate
prefix-cache scorer does; equal hashes mean an equal prefix, as in vLLM's prefix cache).
An engine without a prefix cache is routed with ``prefix_cache=False``. docs/routing.md.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MODES = ("always", "threshold")
# what the router knows of each decode's prefix cache: what it sent there (approximate), or
# what the engine said it holds (its KV events, :mod:`.kv_events`)
PREFIX_INDEXES = ("approximate", "events")
# Why a request took its path: the proxy's disagg_proxy_requests_total{path, reason}.
ALWAYS = "always"
ABOVE = "above_threshold"
BELOW = "below_threshold"
PREFILL_BUSY = "prefill_busy"
UNCOUNTED = "tokens_unknown"  # the engine could not count the prompt: both hops, to be safe


@dataclass(frozen=True)
class Policy:
    """The routing policy (defaults: both hops always, no prefix cache on decode)."""

    mode: str = "always"
    threshold_tokens: int = 0
    prefill_queue_limit: int | None = None
    prefix_cache: bool = False
    block_tokens: int = 16
    # prompt blocks remembered per decode worker (LRU): ~ what its prefix cache holds
    index_blocks: int = 65536
    prefix_index: str = "approximate"
    # with prefix_index "events": where each decode publishes, and how it hashes blocks
    kv_events_port: int = 5557
    kv_events_topic: str = "kv@"
    hash_algo: str = "sha256_cbor"
    hash_seed: str | None = None
    # worker URL → its events socket, where it is not the URL's host at kv_events_port
    # (engines sharing one host in local runs)
    kv_events_endpoints: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"--disaggregate: {self.mode!r} is not one of {', '.join(MODES)}")
        if self.threshold_tokens < 0:
            raise ValueError("--threshold-tokens: must be 0 or more")
        if self.block_tokens < 1:
            raise ValueError("--block-tokens: must be 1 or more")
        if self.prefill_queue_limit is not None and self.prefill_queue_limit < 1:
            raise ValueError("--prefill-queue-limit: must be 1 or more")
        if self.prefix_index not in PREFIX_INDEXES:
            raise ValueError(f"--prefix-index: {self.prefix_index!r} is not one of "
                             f"{', '.join(PREFIX_INDEXES)}")  # fmt: skip
        if self.prefix_index == "events" and not self.prefix_cache:
            raise ValueError("--prefix-index events: reads the decode engines' prefix caches; "
                             "add --decode-prefix-cache")  # fmt: skip

    @property
    def needs_tokens(self) -> bool:
        """Whether a request's tokens must be counted before it is routed."""
        return self.mode == "threshold" or self.prefix_cache


@dataclass(frozen=True)
class Route:
    """A request's path ("pd" or "decode"), why, and the token counts behind it."""

    path: str
    reason: str
    prompt_tokens: int | None = None
    cached_tokens: int = 0

    @property
    def non_cached_tokens(self) -> int | None:
        return None if self.prompt_tokens is None else self.prompt_tokens - self.cached_tokens


def decide(
    policy: Policy,
    prompt_tokens: int | None,
    cached_tokens: int,
    prefill_inflight: Sequence[int],
) -> Route:
    """The path of one request: ``prompt_tokens`` as the engine counts them (None: could
    not be counted), ``cached_tokens`` the picked decode likely holds, and the in-flight
    count of each prefill worker."""
    if policy.mode == "always":
        return Route("pd", ALWAYS, prompt_tokens, cached_tokens)
    if prompt_tokens is None:
        return Route("pd", UNCOUNTED)
    cached = min(cached_tokens, prompt_tokens) if policy.prefix_cache else 0
    if prompt_tokens - cached < policy.threshold_tokens:
        return Route("decode", BELOW, prompt_tokens, cached)
    limit = policy.prefill_queue_limit
    if limit is not None and prefill_inflight and min(prefill_inflight) >= limit:
        return Route("decode", PREFILL_BUSY, prompt_tokens, cached)
    return Route("pd", ABOVE, prompt_tokens, cached)


def block_hashes(tokens: Sequence[int], block_tokens: int) -> list[bytes]:
    """The chained hash of each full block of ``tokens`` (a partial last block is not
    cached by an engine, so it is not hashed)."""
    out: list[bytes] = []
    parent = b""
    for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
        block = tokens[start : start + block_tokens]
        h = hashlib.blake2b(parent, digest_size=16)
        h.update(b",".join(str(t).encode() for t in block))
        parent = h.digest()
        out.append(parent)
    return out


class PrefixIndex:
    """Per worker URL, the prompt blocks (chained hashes) sent there, least recently used
    forgotten first beyond ``capacity`` blocks per worker."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: dict[str, OrderedDict[bytes, None]] = {}

    def matched(self, url: str, hashes: Sequence[bytes]) -> int:
        """How many leading blocks of ``hashes`` worker ``url`` likely holds."""
        held = self._held.get(url)
        if not held:
            return 0
        n = 0
        for h in hashes:
            if h not in held:
                break
            n += 1
        return n

    def record(self, url: str, hashes: Iterable[bytes]) -> None:
        """Worker ``url`` now holds these blocks (most recent last)."""
        held = self._held.setdefault(url, OrderedDict())
        for h in hashes:
            held[h] = None
            held.move_to_end(h)
        while len(held) > self.capacity:
            held.popitem(last=False)

    def keep(self, urls: Iterable[str]) -> None:
        """Forget workers that left the pool."""
        live = set(urls)
        for url in [u for u in self._held if u not in live]:
            del self._held[url]


def affinity_order(inflight: Sequence[int], matched: Sequence[int]) -> list[int]:
    """Indices of the workers (each with its in-flight count and its matched blocks),
    best first: most matched blocks, then fewest in flight, then pool order."""
    return sorted(range(len(inflight)), key=lambda i: (-matched[i], inflight[i], i))
