"""The side-channel listener over real zmq on 127.0.0.1: hostile frames never stop it."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import pytest
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_worker.transfer import handshake
from disagg_worker.transfer.rules.protocol import Codec, MetadataRequest, ProtocolError, Refused

SECRET = b"shared"


def _handler(codec: Codec):
    def answer(frame: bytes) -> bytes:
        try:
            msg = codec.decode(frame)
        except ProtocolError as e:
            return codec.encode(Refused(str(e)))
        assert isinstance(msg, MetadataRequest)
        return codec.encode(Refused(f"echo {msg.engine_id}"))

    return answer


@pytest.fixture(scope="module")
def server() -> Iterator[handshake.HandshakeServer]:
    srv = handshake.HandshakeServer("127.0.0.1", 0, _handler(Codec(SECRET)), max_frame=64 * 1024)
    srv.start()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def ctx() -> Iterator[zmq.Context]:
    c = zmq.Context()
    yield c
    c.term()


def _still_serves(ctx: zmq.Context, port: int) -> None:
    codec = Codec(SECRET)
    frame = codec.encode(MetadataRequest("ok", "", b"n"))
    reply = codec.decode(handshake.request(ctx, "127.0.0.1", port, frame, 5.0))
    assert reply == Refused("echo ok")


def test_valid_request_is_answered_and_ephemeral_port_bound(server, ctx) -> None:
    assert server.port > 0
    _still_serves(ctx, server.port)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=8192))
def test_random_frames_get_a_refusal_and_the_listener_keeps_serving(server, ctx, data) -> None:
    reply = Codec(SECRET).decode(handshake.request(ctx, "127.0.0.1", server.port, data, 5.0))
    assert isinstance(reply, Refused)


def test_truncated_and_wrongly_signed_frames_are_refused(server, ctx) -> None:
    good = Codec(SECRET).encode(MetadataRequest("x", "", b"n"))
    for frame in (good[: len(good) // 2], Codec(b"wrong").encode(MetadataRequest("x", "", b"n"))):
        reply = Codec(SECRET).decode(handshake.request(ctx, "127.0.0.1", server.port, frame, 5.0))
        assert isinstance(reply, Refused)
    _still_serves(ctx, server.port)


def test_oversized_frame_is_dropped_at_the_transport(server, ctx) -> None:
    with pytest.raises(handshake.HandshakeTimeout, match="no handshake reply"):
        handshake.request(ctx, "127.0.0.1", server.port, b"\x00" * (256 * 1024), 0.5)
    _still_serves(ctx, server.port)


def test_odd_multipart_shapes_from_a_dealer_are_ignored(server, ctx) -> None:
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(f"tcp://127.0.0.1:{server.port}")
    for parts in ([b"a"], [b"a", b"b", b"c"], [b"x", b"", b"y", b"z"], [b""]):
        sock.send_multipart(parts)
    sock.send_multipart([b"", msgspec.msgpack.encode([1, b"", b""])])  # REQ-shaped junk
    assert sock.poll(2000), "a REQ-shaped frame gets a reply"
    sock.recv_multipart()
    sock.close()
    _still_serves(ctx, server.port)


def test_silent_peer_times_out_within_the_timeout(ctx) -> None:
    sink = ctx.socket(zmq.ROUTER)
    port = sink.bind_to_random_port("tcp://127.0.0.1")
    try:
        with pytest.raises(handshake.HandshakeTimeout):
            handshake.request(ctx, "127.0.0.1", port, b"hi", 0.2)
    finally:
        sink.close(linger=0)


def test_secret_file_errors_name_the_variable(tmp_path) -> None:
    assert handshake.load_secret(None) is None
    (tmp_path / "s").write_bytes(b" abc \n")
    assert handshake.load_secret(str(tmp_path / "s")) == b"abc"
    (tmp_path / "e").write_bytes(b"\n")
    with pytest.raises(ValueError, match=r"DISAGG_HMAC_SECRET_PATH: .* is empty"):
        handshake.load_secret(str(tmp_path / "e"))
    with pytest.raises(ValueError, match="DISAGG_HMAC_SECRET_PATH: cannot read"):
        handshake.load_secret(str(tmp_path / "missing"))


def test_port_in_use_names_the_setting(server) -> None:
    with pytest.raises(OSError, match=r"DISAGG_SIDE_CHANNEL_PORT: cannot listen on 127\.0\.0\.1"):
        handshake.HandshakeServer("127.0.0.1", server.port, lambda f: f)


def test_channel_keeps_its_socket_between_requests_and_replaces_a_stuck_one(server, ctx) -> None:
    codec = Codec(SECRET)
    channel = handshake.Channel(ctx, "127.0.0.1", server.port)
    try:
        for name in ("a", "b", "c"):
            frame = codec.encode(MetadataRequest(name, "", b"n"))
            assert codec.decode(channel.request(frame, 5.0)) == Refused(f"echo {name}")
        assert len(channel._idle) == 1  # one connection served all three
        silent = handshake.Channel(ctx, "127.0.0.1", 1)  # nothing listens: no reply
        with pytest.raises(handshake.HandshakeTimeout):
            silent.request(b"x", 0.05)
        assert silent._idle == []  # the stuck REQ socket was closed, not kept
        silent.close()
    finally:
        channel.close()
    with pytest.raises(zmq.ZMQError):
        channel.request(b"x", 1.0)
