"""Hostile side-channel frames for `disagg bench faults`: what a broken or malicious peer
may send a prefill's handshake listener.

Randomness and the secret are passed in; frames are bytes, and
:mod:`disagg_tools.bench.fault_clients` sends them. Each kind (:data:`KINDS`, what it
sends beside each) aims at one of the listener's defences
(:mod:`disagg_worker.transfer.handshake`, :mod:`disagg_worker.transfer.rules.protocol`), so
a defence that breaks shows as the kind that got through.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from disagg_worker.transfer.rules.protocol import MAX_FRAME_BYTES, Claim, Codec, MetadataRequest

# kind → share of the frames sent; each kind aims at one of the listener's defences
KINDS: dict[str, float] = {
    "random": 0.35,  # random bytes, 0..64 KiB: not msgpack, or not an envelope
    "truncated": 0.2,  # a signed envelope cut short: msgpack that ends mid-value
    "wrong_hmac": 0.15,  # a well-formed metadata request or claim signed with another secret
    # a correctly signed claim (a peer holding the secret, or a compromised one) for an
    # unknown request, 1k..50k block ids, one in four naming a negative id; those over
    # MAX_CLAIM_BLOCKS ids are refused unread
    "long_claim": 0.15,
    # a signed claim just under MAX_FRAME_BYTES (the largest frame the codec reads) naming
    # more blocks than a claim may: refused from the array header, before any id is decoded
    "near_limit": 0.05,
    # a signed claim 1..64 bytes over the limit: the transport takes it, the codec refuses
    # it by size before decoding
    "over_limit": 0.05,
    # random bytes 64 B..128 KiB over the limit: the transport's message cap drops them (and
    # the connection) without an answer
    "over_transport": 0.05,
}
UNANSWERED = frozenset({"over_transport"})  # kinds the listener never answers
TRANSPORT_SLACK = 64  # the listener's socket takes messages up to the limit plus this
WIDE_ID = 1 << 20  # block ids from here on are 5 bytes in msgpack: frame sizes step by 5


class HostileFrames:
    """Frame maker for one run: ``secret`` (the run's handshake secret, None when it has
    none) signs what should pass the HMAC check; a random other secret what should not."""

    def __init__(self, rng: random.Random, secret: bytes | None) -> None:
        self._rng = rng
        big = 4 * MAX_FRAME_BYTES  # our encoder must produce frames the listener refuses
        self._signed = Codec(secret, max_frame=big)
        self._wrong = Codec(rng.randbytes(32), max_frame=big)

    def frames(self, count: int) -> Iterator[tuple[str, bytes]]:
        """``count`` (kind, frame) pairs, kinds drawn by :data:`KINDS`' shares."""
        kinds, weights = list(KINDS), list(KINDS.values())
        for _ in range(count):
            kind = self._rng.choices(kinds, weights)[0]
            yield kind, self.frame(kind)

    def frame(self, kind: str) -> bytes:
        rng = self._rng
        if kind == "random":
            return rng.randbytes(rng.randint(0, 64 << 10))
        if kind == "truncated":
            whole = self._signed.encode(self._message())
            return whole[: rng.randint(1, len(whole) - 1)]
        if kind == "wrong_hmac":
            return self._wrong.encode(self._message())
        if kind == "long_claim":
            start = rng.randrange(WIDE_ID)
            ids = list(range(start, start + rng.randint(1000, 50_000)))
            if rng.random() < 0.25:
                ids[rng.randrange(len(ids))] = -1
            return self._signed.encode(self._claim(ids))
        if kind == "near_limit":
            return self.claim_of_size(MAX_FRAME_BYTES - rng.randint(0, 4096))
        if kind == "over_limit":
            return self.claim_of_size(MAX_FRAME_BYTES + 5 + rng.randint(0, TRANSPORT_SLACK - 5))
        if kind == "over_transport":
            extra = rng.randint(TRANSPORT_SLACK + 1, 128 << 10)
            return rng.randbytes(MAX_FRAME_BYTES + extra)
        raise ValueError(f"unknown hostile frame kind {kind!r}; one of {', '.join(KINDS)}")

    def claim_of_size(self, size: int) -> bytes:
        """A signed claim whose frame is at most ``size`` bytes and within 5 of it (each
        block id from WIDE_ID on adds exactly 5 bytes); ``size`` of 4 KiB and up."""
        probe_ids = (size - 2048) // 5  # enough ids that every length header is its widest
        probe = len(self._signed.encode(self._claim(list(range(WIDE_ID, WIDE_ID + probe_ids)))))
        n = probe_ids + (size - probe) // 5
        return self._signed.encode(self._claim(list(range(WIDE_ID, WIDE_ID + n))))

    def _message(self) -> MetadataRequest | Claim:
        rng = self._rng
        if rng.random() < 0.5:
            return MetadataRequest("fuzz", rng.randbytes(8).hex(), rng.randbytes(16))
        return self._claim([rng.randrange(512) for _ in range(rng.randint(1, 64))])

    def _claim(self, ids: list[int]) -> Claim:
        rng = self._rng
        request_id = f"fuzz-{rng.getrandbits(32):08x}"
        return Claim(request_id, ids, rng.uniform(0, 3600), rng.randbytes(16))
