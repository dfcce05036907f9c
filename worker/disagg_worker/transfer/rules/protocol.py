"""Handshake wire protocol: typed messages, versioning, compatibility hash, HMAC framing.

msgspec and the standard library only; never pickle. One file holds the whole contract
between a decode worker and the prefill worker it reads KV blocks from. A frame is the
msgpack array ``[version, body, mac]`` whose envelope never changes shape, so a peer on
another version is refused by name instead of failing to decode. Framing, the compat
hash's inputs and the limits: docs/worker.md (Handshake); the versions: above
:data:`PROTOCOL_VERSION`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from typing import Annotated, Literal, Union

import msgspec

from disagg_worker.transfer.rules.layout import KVLayout

# The versions. A peer on another version is refused by version (the envelope never changes).
# 1: meta request/reply with nonce echo, refusal message.
# 2: Claim / ClaimAnswer: before each READ decode asks whether prefill still holds the blocks
#    (prefill extends the lease to cover the read), so no READ starts on expired blocks.
# 3: a Claim names its blocks in order (an ordered suffix of the published list, never a
#    reordering) with the digest of decode's prompt (prompt_digest); a claim for KV computed
#    for another prompt is refused (prompt_differs).
# 4: TP of different sizes: PeerMetadata says which model KV heads the rank's regions hold
#    (kv_heads, model_kv_heads), the engine's incarnation (shared by its ranks; the agent
#    name is per rank) and every rank's port (rank_ports); LayoutInfo has per_head_regions;
#    the compat hash names model heads, not the TP size. Within 4, optional: rank_hosts
#    (ranks over a group's pods; absent: all on rank 0's host) and push (the prefill answers
#    a Push: the claim, then a WRITE into decode's blocks, notified after the bytes; decode
#    pushes only to a prefill that says so).
PROTOCOL_VERSION = 4
# Agent metadata is 0.5 to 8 KiB (1 to 128 regions, measured) and a claim of MAX_CLAIM_BLOCKS ids
# at most 160 KiB: anything bigger is hostile. The transport refuses it before allocating.
MAX_FRAME_BYTES = 256 << 10
MAX_CLAIM_BLOCKS = 32768  # 512k tokens of 16-token blocks; a decoded id costs ~36 bytes
MAX_CLAIM_DEADLINE_S = 3600.0  # a claim may pin blocks this long at most
MAX_REQUEST_ID = 512  # characters
# a Push names its blocks twice (prefill's and decode's): at most this many each, so the
# frame stays under MAX_FRAME_BYTES; a longer request is read instead
MAX_PUSH_BLOCKS = 8192
MAX_PUSH_REGIONS = 1024  # a region per layer and KV head at most
MAX_AGENT_NAME = 256
DIGEST_CHARS = 32  # hex characters of a prompt digest (128 bits)


class ProtocolError(ValueError):
    """A frame that cannot be accepted; the message says why."""


class FrameError(ProtocolError):
    """Malformed, truncated or oversized frame."""


class AuthError(ProtocolError):
    """HMAC missing, unexpected or wrong."""


class VersionError(ProtocolError):
    """The peer speaks another protocol version."""


class LayoutInfo(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    num_layers: int
    num_kv_heads: int
    head_dim: int
    block_size: int
    num_blocks: int
    dtype: str
    layout: str
    block_major: bool
    per_head_regions: bool

    @classmethod
    def of(cls, layout: KVLayout) -> LayoutInfo:
        return cls(
            num_layers=layout.num_layers,
            num_kv_heads=layout.num_kv_heads,
            head_dim=layout.head_dim,
            block_size=layout.block_size,
            num_blocks=layout.num_blocks,
            dtype=layout.dtype,
            layout=layout.layout,
            block_major=layout.block_major,
            per_head_regions=layout.per_head_regions,
        )


class MetadataRequest(msgspec.Struct, frozen=True, tag="get_meta"):
    """Decode → prefill: send me your metadata. ``nonce`` is echoed to bind the reply."""

    engine_id: str
    compat_hash: str
    nonce: bytes


class PeerMetadata(msgspec.Struct, frozen=True, tag="meta"):
    """Prefill → decode: everything needed to READ its KV blocks.

    ``kv_heads``: the model's KV heads this rank's regions hold, in region order (of
    ``model_kv_heads``); ``rank_ports``: the side-channel port of each rank of the engine
    (index = rank); ``incarnation``: new at every start of the engine, the same on all
    its ranks."""

    engine_id: str
    agent_name: str
    incarnation: str
    agent_metadata: bytes  # opaque NIXL blob, handed to add_remote_agent as bytes
    region_addrs: list[int]
    block_len: int
    device_id: int
    layout: LayoutInfo
    memory_type: str
    tp_size: int
    tp_rank: int
    kv_heads: list[int]
    model_kv_heads: int
    rank_ports: list[int]
    protocol_version: int
    compat_hash: str
    nonce: bytes
    # each rank's side-channel host (index = rank; "": rank 0's): the ranks of one engine
    # may live in several pods. Absent from older peers: every rank on rank 0's host.
    rank_hosts: list[str] = msgspec.field(default_factory=list)
    # answers a Push (absent from older peers: read from them)
    push: bool = False


class Refused(msgspec.Struct, frozen=True, tag="refused"):
    """Either side: the request was refused; ``reason`` is for humans. Tag ``refused``."""

    reason: str


class Claim(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="claim"):
    """Decode → prefill, before posting a READ: do you still hold these blocks for me?

    ``deadline_s`` is the time decode's read may still take; a held lease is extended to
    cover it. ``block_ids`` in the order decode reads them; ``prompt_digest`` is
    :func:`prompt_digest` of decode's prompt ("" when decode does not know its tokens).
    ``nonce`` is echoed to bind the answer.
    """

    request_id: Annotated[str, msgspec.Meta(max_length=MAX_REQUEST_ID)]
    block_ids: Annotated[
        list[Annotated[int, msgspec.Meta(ge=0)]], msgspec.Meta(max_length=MAX_CLAIM_BLOCKS)
    ]
    deadline_s: Annotated[float, msgspec.Meta(ge=0, le=MAX_CLAIM_DEADLINE_S)]
    nonce: bytes
    prompt_digest: Annotated[str, msgspec.Meta(max_length=DIGEST_CHARS)] = ""


ClaimReason = Literal["", "expired", "released", "unknown", "blocks_differ", "prompt_differs"]


class ClaimAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="claim_answer"):
    """Prefill → decode: ``held`` (lease now runs ``expires_in_s`` more) or not and why.

    ``reason`` when not held: ``expired`` (the lease ran out ``-expires_in_s`` seconds
    ago), ``released`` (already read and freed), ``unknown`` (never published here, or
    ended long ago), ``blocks_differ`` (``held_ids`` are the published ones, in order),
    ``prompt_differs`` (the blocks hold another prompt's KV).
    """

    request_id: str
    held: bool
    reason: ClaimReason
    expires_in_s: float
    held_ids: list[int]
    nonce: bytes


class PushTarget(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where a push writes: decode's NIXL agent and its registered regions (the blocks
    of every region at ``block_len`` apart, as in :class:`PeerMetadata`)."""

    agent_name: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_AGENT_NAME)]
    agent_metadata: bytes  # opaque NIXL blob, handed to add_remote_agent as bytes
    region_addrs: Annotated[
        list[Annotated[int, msgspec.Meta(gt=0)]],
        msgspec.Meta(min_length=1, max_length=MAX_PUSH_REGIONS),
    ]
    block_len: Annotated[int, msgspec.Meta(gt=0)]
    num_blocks: Annotated[int, msgspec.Meta(gt=0)]
    device_id: Annotated[int, msgspec.Meta(ge=0)]


class Push(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="push"):
    """Decode → prefill (one that says ``push``): claim these blocks as :class:`Claim`
    does, then WRITE them, in ``claim.block_ids`` order, into ``dest_ids`` of ``target``,
    with the notification :data:`PUSH_NOTIF_PREFIX` + request id, which NIXL delivers
    only once the bytes are there. The prefill gives the WRITE up (and never writes later)
    once ``claim.deadline_s`` has passed since it got the frame."""

    claim: Claim
    target: PushTarget
    dest_ids: Annotated[
        list[Annotated[int, msgspec.Meta(ge=0)]], msgspec.Meta(max_length=MAX_PUSH_BLOCKS)
    ]
    merge: bool = True


class PushAnswer(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag="push_answer"):
    """Prefill → decode: the claim's answer, and whether the WRITE is posted (``error``
    says why not, when the blocks are held but could not be written)."""

    answer: ClaimAnswer
    posted: bool
    error: str = ""


PUSH_NOTIF_PREFIX = b"p:"  # a push's notification: b"p:" + request id (utf-8)

Message = Union[  # noqa: UP007
    MetadataRequest, PeerMetadata, Refused, Claim, ClaimAnswer, Push, PushAnswer
]


class _Envelope(msgspec.Struct, array_like=True):
    version: int
    body: bytes
    mac: bytes


def prompt_digest(tokens: list[int]) -> str:
    """What binds KV blocks to the prompt they were computed for: a hash of its token ids
    (decode refuses KV whose digest is not its own prompt's)."""
    data = b"".join(int(t).to_bytes(4, "little", signed=True) for t in tokens)
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def compat_hash(layout: KVLayout, memory_type: str, model_kv_heads: int) -> str:
    """Hash of everything that must match between peers (inputs listed in the docstring)."""
    fields = f"{layout.compat_hash(heads=False)}|{memory_type}|{model_kv_heads}"
    return hashlib.sha256(f"{PROTOCOL_VERSION}|{fields}".encode()).hexdigest()[:16]


def mismatches(
    layout: KVLayout, memory_type: str, model_kv_heads: int, remote: PeerMetadata
) -> list[str]:
    """Why ``remote`` cannot be read into a local cache, by name (``block_size 16 != 32``);
    which of its heads a rank reads is checked per read (:func:`head_problems`)."""
    problems: list[str] = []
    if remote.protocol_version != PROTOCOL_VERSION:
        problems.append(f"protocol_version {PROTOCOL_VERSION} != {remote.protocol_version}")
    try:
        theirs = KVLayout.model_validate(msgspec.structs.asdict(remote.layout))
    except ValueError as e:
        return [*problems, f"layout invalid: {e}"]
    problems += layout.mismatches(theirs, heads=False)
    if memory_type != remote.memory_type:
        problems.append(f"memory_type {memory_type} != {remote.memory_type}")
    if model_kv_heads != remote.model_kv_heads:
        problems.append(f"model KV heads {model_kv_heads} != {remote.model_kv_heads}")
    if not problems:
        problems += _geometry_problems(theirs, remote)
    return problems


def head_problems(
    mine: tuple[int, ...], remote: PeerMetadata, expected: tuple[int, ...], per_head: bool
) -> list[str]:
    """Why this rank (holding heads ``mine``) cannot read from ``remote``, which should
    hold ``expected`` (the mapping's view of its rank): it holds other heads, or the two
    split heads differently and the cache has no region per head to read them into."""
    problems = []
    if tuple(remote.kv_heads) != expected:
        problems.append(
            f"rank {remote.tp_rank} of {remote.tp_size} holds KV heads {remote.kv_heads}, "
            f"expected {list(expected)}"
        )
    elif tuple(remote.kv_heads) != mine and not per_head:
        problems.append(
            f"KV heads {list(mine)} here, {remote.kv_heads} on rank {remote.tp_rank}: "
            "tensor parallelism of different sizes needs a cache with a region per KV head"
        )
    return problems


def _geometry_problems(theirs: KVLayout, remote: PeerMetadata) -> list[str]:
    problems = []
    if len(remote.kv_heads) != theirs.num_kv_heads:
        problems.append(f"kv_heads lists {len(remote.kv_heads)} != {theirs.num_kv_heads}")
    if len(remote.region_addrs) != theirs.num_regions:
        problems.append(f"regions {len(remote.region_addrs)} != {theirs.num_regions}")
    if remote.block_len != theirs.block_len:
        problems.append(f"block_len {remote.block_len} != {theirs.block_len}")
    if any(a <= 0 for a in remote.region_addrs):
        problems.append("region address not positive")
    return problems


class Codec:
    """Encodes and decodes frames; holds the shared secret (or None)."""

    def __init__(
        self,
        secret: bytes | None = None,
        *,
        max_frame: int = MAX_FRAME_BYTES,
        version: int = PROTOCOL_VERSION,
    ):
        self._secret = secret or None
        self.version = version
        self._max = max_frame
        self._enc = msgspec.msgpack.Encoder()
        self._env = msgspec.msgpack.Decoder(_Envelope)
        self._msg = msgspec.msgpack.Decoder(Message)

    def _mac(self, version: int, body: bytes) -> bytes:
        if self._secret is None:
            return b""
        data = version.to_bytes(4, "big") + body
        return hmac.new(self._secret, data, hashlib.sha256).digest()

    def encode(self, msg: Message) -> bytes:
        version = self.version
        body = self._enc.encode(msg)
        frame = self._enc.encode(_Envelope(version, body, self._mac(version, body)))
        if len(frame) > self._max:
            raise FrameError(f"frame of {len(frame)} bytes exceeds the {self._max}-byte limit")
        return frame

    def decode(self, frame: bytes) -> Message:
        """Raise FrameError / VersionError / AuthError; never anything else."""
        if len(frame) > self._max:
            raise FrameError(f"frame of {len(frame)} bytes exceeds the {self._max}-byte limit")
        try:
            env = self._env.decode(frame)
        except (msgspec.DecodeError, ValueError) as e:
            raise FrameError(f"malformed frame: {e}") from None
        if env.version != self.version:
            raise VersionError(f"protocol_version {self.version} != {env.version}")
        self._check_mac(env)
        try:
            return self._msg.decode(env.body)
        except (msgspec.DecodeError, ValueError) as e:
            raise FrameError(f"malformed message: {e}") from None

    def _check_mac(self, env: _Envelope) -> None:
        if self._secret is None:
            if env.mac:
                raise AuthError("peer signs its frames but no handshake secret is configured")
            return
        if not env.mac:
            raise AuthError("peer frame carries no HMAC; configure the same handshake secret")
        if not hmac.compare_digest(env.mac, self._mac(env.version, env.body)):
            raise AuthError("HMAC mismatch: the peer uses a different handshake secret")


def answer(
    codec: Codec,
    frame: bytes,
    metadata: Callable[[bytes], PeerMetadata],
    claim: Callable[[Claim], ClaimAnswer],
    push: Callable[[Push], PushAnswer] | None = None,
) -> tuple[bytes | None, bool]:
    """Prefill's reply to one side-channel frame: ``(reply, refused)``.

    A valid MetadataRequest gets ``metadata(nonce)``, a valid Claim ``claim(msg)``, a
    valid Push ``push(msg)`` (refused when ``push`` is None); anything else a
    :class:`Refused` saying why (signed with our secret, so a peer with another secret
    learns only that it is refused).
    """
    try:
        msg = codec.decode(frame)
    except ProtocolError as e:
        return _refusal(codec, str(e)), True
    if isinstance(msg, MetadataRequest):
        return codec.encode(metadata(msg.nonce)), False
    if isinstance(msg, Claim):
        return codec.encode(claim(msg)), False
    if isinstance(msg, Push):
        if push is None:
            return _refusal(codec, "this prefill does not accept pushes; READ its blocks"), True
        return codec.encode(push(msg)), False
    return _refusal(codec, f"unexpected {type(msg).__name__}; send a MetadataRequest"), True


def _refusal(codec: Codec, reason: str) -> bytes | None:
    try:
        return codec.encode(Refused(reason[:500]))
    except ProtocolError:
        return None
