"""Handshake wire contract: typed frames, version and HMAC refusal, named mismatches."""

from __future__ import annotations

import contextlib

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.rules.protocol import (
    DIGEST_CHARS,
    AuthError,
    Claim,
    ClaimAnswer,
    Codec,
    FrameError,
    LayoutInfo,
    MetadataRequest,
    PeerMetadata,
    ProtocolError,
    Refused,
    VersionError,
    prompt_digest,
)

LAYOUT = KVLayout(num_layers=2, num_kv_heads=2, head_dim=8, block_size=16, num_blocks=8)


def meta(layout: KVLayout = LAYOUT, **over: object) -> PeerMetadata:
    fields: dict[str, object] = dict(
        engine_id="p0",
        agent_name="p0-1",
        incarnation="p0-1",
        agent_metadata=b"\x00nixl",
        region_addrs=[0x1000] * layout.num_regions,
        block_len=layout.block_len,
        device_id=0,
        layout=LayoutInfo.of(layout),
        memory_type="DRAM",
        tp_size=1,
        tp_rank=0,
        kv_heads=list(range(layout.num_kv_heads)),
        model_kv_heads=layout.num_kv_heads,
        rank_ports=[5600],
        protocol_version=protocol.PROTOCOL_VERSION,
        compat_hash=protocol.compat_hash(layout, "DRAM", layout.num_kv_heads),
        nonce=b"n" * 16,
    )
    fields.update(over)
    return PeerMetadata(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("secret", [None, b"s3cret"])
def test_every_message_round_trips(secret: bytes | None) -> None:
    codec = Codec(secret)
    for msg in (MetadataRequest("d0", "abc", b"n"), meta(), Refused("no")):
        assert codec.decode(codec.encode(msg)) == msg


def test_frames_are_msgpack_never_pickle() -> None:
    frame = Codec().encode(Refused("x"))
    assert not frame.startswith(b"\x80")  # pickle protocol marker
    version, body, mac = msgspec.msgpack.decode(frame)
    assert version == protocol.PROTOCOL_VERSION and mac == b""
    assert msgspec.msgpack.decode(body) == {"type": "refused", "reason": "x"}


def test_wrong_missing_or_unexpected_hmac_is_refused() -> None:
    frame = Codec(b"right").encode(Refused("x"))
    with pytest.raises(AuthError, match="different handshake secret"):
        Codec(b"wrong").decode(frame)
    with pytest.raises(AuthError, match="no handshake secret is configured"):
        Codec(None).decode(frame)
    with pytest.raises(AuthError, match="carries no HMAC"):
        Codec(b"right").decode(Codec(None).encode(Refused("x")))


def test_tampered_body_fails_hmac() -> None:
    codec = Codec(b"k")
    version, body, mac = msgspec.msgpack.decode(codec.encode(Refused("free blocks 1")))
    forged = msgspec.msgpack.encode([version, body.replace(b"1", b"2"), mac])
    with pytest.raises(AuthError):
        codec.decode(forged)


def test_other_protocol_version_is_refused_by_name() -> None:
    with pytest.raises(VersionError, match="protocol_version 1 != 2"):
        Codec(version=1).decode(Codec(version=2).encode(Refused("x")))


def test_oversized_frame_refused_before_decoding() -> None:
    codec = Codec(max_frame=1000)
    with pytest.raises(FrameError, match="exceeds the 1000-byte limit"):
        codec.decode(b"\x93" + b"\x00" * 2000)
    with pytest.raises(FrameError, match="exceeds"):
        codec.encode(Refused("x" * 2000))


def test_truncated_frame_is_a_frame_error() -> None:
    frame = Codec().encode(meta())
    for cut in (1, len(frame) // 2, len(frame) - 1):
        with pytest.raises(FrameError):
            Codec().decode(frame[:cut])


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_random_bytes_raise_only_protocol_errors(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        Codec(b"k").decode(data)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.integers(-(2**63), 2**63 - 1), st.binary(max_size=64), st.text(max_size=16)),
        max_size=4,
    )
)
def test_well_formed_msgpack_of_the_wrong_shape_raises_only_protocol_errors(items) -> None:
    with contextlib.suppress(ProtocolError):
        Codec().decode(msgspec.msgpack.encode(items))


def test_compat_hash_inputs() -> None:
    base = protocol.compat_hash(LAYOUT, "DRAM", 2)
    assert base == protocol.compat_hash(LAYOUT.model_copy(update={"num_blocks": 99}), "DRAM", 2)
    assert base != protocol.compat_hash(LAYOUT.model_copy(update={"block_size": 32}), "DRAM", 2)
    assert base != protocol.compat_hash(LAYOUT, "VRAM", 2)
    assert base != protocol.compat_hash(LAYOUT, "DRAM", 4)  # another model's KV heads
    # ranks holding 1 or 2 of the model's heads (TP 2 vs TP 1) hash alike
    assert base == protocol.compat_hash(LAYOUT.model_copy(update={"num_kv_heads": 1}), "DRAM", 2)


def test_compatible_peer_has_no_mismatches() -> None:
    remote = meta(LAYOUT.model_copy(update={"num_blocks": 1000}))
    assert protocol.mismatches(LAYOUT, "DRAM", 2, remote) == []
    # a rank of a TP-2 engine holding one of the two heads: compatible, the heads are
    # checked per read
    one = LAYOUT.model_copy(update={"num_kv_heads": 1})
    rank1 = meta(one, kv_heads=[1], model_kv_heads=2, tp_size=2, tp_rank=1)
    assert protocol.mismatches(LAYOUT, "DRAM", 2, rank1) == []


def test_mismatches_are_named() -> None:
    theirs = LAYOUT.model_copy(update={"block_size": 32, "dtype": "float16"})
    remote = meta(theirs, memory_type="VRAM", model_kv_heads=8, protocol_version=7)
    assert protocol.mismatches(LAYOUT, "DRAM", 2, remote) == [
        f"protocol_version {protocol.PROTOCOL_VERSION} != 7",
        "block_size 16 != 32",
        "dtype bfloat16 != float16",
        "memory_type DRAM != VRAM",
        "model KV heads 2 != 8",
    ]


def test_head_problems_name_the_rank_and_the_missing_region_per_head() -> None:
    one = LAYOUT.model_copy(update={"num_kv_heads": 1})
    rank1 = meta(one, kv_heads=[1], model_kv_heads=2, tp_size=2, tp_rank=1)
    assert protocol.head_problems((1,), rank1, (1,), per_head=False) == []
    assert protocol.head_problems((0, 1), rank1, (1,), per_head=True) == []
    assert protocol.head_problems((0, 1), rank1, (0,), per_head=True) == [
        "rank 1 of 2 holds KV heads [1], expected [0]"
    ]
    assert protocol.head_problems((0, 1), rank1, (1,), per_head=False) == [
        "KV heads [0, 1] here, [1] on rank 1: tensor parallelism of different sizes needs a "
        "cache with a region per KV head"
    ]


def test_inconsistent_geometry_is_named() -> None:
    assert protocol.mismatches(LAYOUT, "DRAM", 2, meta(block_len=3, region_addrs=[1, 2])) == [
        "regions 2 != 1",
        "block_len 3 != " + str(LAYOUT.block_len),
    ]
    assert protocol.mismatches(LAYOUT, "DRAM", 2, meta(kv_heads=[0])) == ["kv_heads lists 1 != 2"]
    bad = meta()
    bad = msgspec.structs.replace(
        bad, layout=LayoutInfo(0, 1, 1, 1, 1, "bfloat16", "NHD", True, False)
    )
    assert protocol.mismatches(LAYOUT, "DRAM", 2, bad)[0].startswith("layout invalid")


def no_claims(msg: Claim) -> ClaimAnswer:
    raise AssertionError("no claim expected")


def test_answer_serves_metadata_for_requests_and_refuses_the_rest() -> None:
    codec = Codec(b"k")

    def metadata(nonce: bytes) -> PeerMetadata:
        return meta(nonce=nonce)

    reply, refused = protocol.answer(
        codec, codec.encode(MetadataRequest("d", "", b"abc")), metadata, no_claims
    )
    assert not refused and codec.decode(reply or b"") == meta(nonce=b"abc")
    reply, refused = protocol.answer(codec, codec.encode(meta()), metadata, no_claims)
    assert refused and codec.decode(reply or b"") == Refused(
        "unexpected PeerMetadata; send a MetadataRequest"
    )
    reply, refused = protocol.answer(codec, b"junk", metadata, no_claims)
    assert refused and isinstance(codec.decode(reply or b""), Refused)


def test_answer_hands_claims_to_the_claim_callback() -> None:
    codec = Codec(b"k")

    def claim(msg: Claim) -> ClaimAnswer:
        return ClaimAnswer(msg.request_id, False, "expired", -0.5, [], msg.nonce)

    frame = codec.encode(Claim("r1", [3, 4], 2.0, b"n"))
    reply, refused = protocol.answer(codec, frame, lambda n: meta(nonce=n), claim)
    assert not refused
    assert codec.decode(reply or b"") == ClaimAnswer("r1", False, "expired", -0.5, [], b"n")


def _push(**target: object) -> protocol.Push:
    fields: dict[str, object] = {
        "agent_name": "d0", "agent_metadata": b"m", "region_addrs": [4096],
        "block_len": 64, "num_blocks": 8, "device_id": 0, **target,
    }  # fmt: skip
    return protocol.Push(Claim("r1", [1], 1.0, b"n"), protocol.PushTarget(**fields), [2])  # type: ignore[arg-type]


def test_answer_hands_pushes_to_the_push_callback_and_refuses_them_without_one() -> None:
    codec = Codec(b"k")
    frame = codec.encode(_push())

    def push(msg: protocol.Push) -> protocol.PushAnswer:
        held = ClaimAnswer(msg.claim.request_id, True, "", 1.0, [], msg.claim.nonce)
        return protocol.PushAnswer(held, True)

    reply, refused = protocol.answer(codec, frame, lambda n: meta(nonce=n), no_claims, push)
    assert not refused and codec.decode(reply or b"") == push(_push())
    reply, refused = protocol.answer(codec, frame, lambda n: meta(nonce=n), no_claims)
    assert refused and codec.decode(reply or b"") == Refused(
        "this prefill does not accept pushes; READ its blocks"
    )


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ({"region_addrs": [0]}, "Expected `int` >= 1"),
        ({"region_addrs": []}, "length >= 1"),
        ({"agent_name": ""}, "length >= 1"),
        ({"block_len": 0}, "Expected `int` >= 1"),
        ({"region_addrs": [4096] * (protocol.MAX_PUSH_REGIONS + 1)}, "length <= 1024"),
    ],
)
def test_malformed_push_targets_are_refused_before_anything_is_loaded(
    target: dict[str, object], why: str
) -> None:
    codec = Codec(b"k")
    body = msgspec.msgpack.decode(msgspec.msgpack.encode(_push()))
    body["target"].update(target)
    raw = msgspec.msgpack.encode(body)
    env = protocol._Envelope(protocol.PROTOCOL_VERSION, raw, codec._mac(codec.version, raw))
    with pytest.raises(FrameError, match=why):
        codec.decode(msgspec.msgpack.encode(env))


def test_a_push_of_the_most_blocks_fits_one_frame() -> None:
    ids = list(range(protocol.MAX_PUSH_BLOCKS))
    target = protocol.PushTarget("d" * 256, b"m" * 8192, [1 << 47] * 128, 1 << 20, 1 << 20, 7)
    big = protocol.Push(Claim("r" * 512, ids, 1.0, b"n" * 16, "f" * 32), target, ids[::-1])
    assert Codec(b"k").decode(Codec(b"k").encode(big)) == big


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"request_id": "r", "block_ids": [-1], "deadline_s": 1.0}, "Expected `int` >= 0"),
        ({"request_id": "r", "block_ids": [1], "deadline_s": 1e9}, "Expected `float` <="),
        ({"request_id": "r", "block_ids": [1], "deadline_s": -1.0}, "Expected `float` >= 0"),
        ({"request_id": "r" * 600, "block_ids": [], "deadline_s": 1.0}, "length <= 512"),
        ({"request_id": "r", "block_ids": "1", "deadline_s": 1.0}, "Expected `array`"),
        ({"request_id": "r", "block_ids": [], "deadline_s": 1.0, "x": 1}, "unknown field"),
    ],
)
def test_malformed_claims_are_refused_before_they_reach_the_lease_table(
    body: dict[str, object], why: str
) -> None:
    codec = Codec(b"k")
    raw = msgspec.msgpack.encode({"type": "claim", "nonce": b"n", **body})
    env = protocol._Envelope(protocol.PROTOCOL_VERSION, raw, codec._mac(codec.version, raw))
    frame = msgspec.msgpack.encode(env)
    with pytest.raises(FrameError, match=why):
        codec.decode(frame)
    reply, refused = protocol.answer(codec, frame, lambda n: meta(nonce=n), no_claims)
    assert refused and isinstance(codec.decode(reply or b""), Refused)


def test_claims_carry_the_hmac_like_handshake_frames() -> None:
    frame = Codec(b"right").encode(Claim("r1", [1], 1.0, b"n"))
    with pytest.raises(AuthError, match="HMAC mismatch"):
        Codec(b"wrong").decode(frame)
    with pytest.raises(AuthError, match="no handshake secret"):
        Codec(None).decode(frame)


def test_prompt_digest_binds_the_exact_token_ids() -> None:
    base = prompt_digest([1, 2, 3])
    assert len(base) == DIGEST_CHARS and base == prompt_digest([1, 2, 3])
    others = {prompt_digest(t) for t in ([1, 2], [1, 2, 3, 0], [3, 2, 1], [1, 2, 4], [258])}
    assert base not in others and len(others) == 5


def test_a_claim_naming_too_many_blocks_is_refused_before_its_ids_are_decoded() -> None:
    """A signed claim costs at most about its own size: more ids than a claim may name are
    refused from the array header (each decoded id would cost ~36 bytes of objects)."""
    import tracemalloc

    big = Codec(b"k", max_frame=4 << 20)
    ok = big.encode(Claim("r", list(range(protocol.MAX_CLAIM_BLOCKS)), 1.0, b"n"))
    assert len(ok) <= protocol.MAX_FRAME_BYTES  # the largest claim fits a frame
    assert len(Codec(b"k").decode(ok).block_ids) == protocol.MAX_CLAIM_BLOCKS  # type: ignore[union-attr]
    frame = big.encode(Claim("r", list(range(1 << 20, (1 << 20) + 50_000)), 1.0, b"n"))
    tracemalloc.start()
    try:
        with pytest.raises(FrameError, match="length <= 32768"):
            big.decode(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(frame), peak
