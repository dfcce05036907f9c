"""Handshake side channel over pyzmq: a ROUTER listener (prefill) and a REQ client (decode).

I/O layer (zmq only; frames are opaque bytes here, :mod:`protocol` gives them meaning).
Every socket has linger 0 and receive/send timeouts; the listener caps message size at the
transport (ZMQ_MAXMSGSIZE) and treats any exception from a frame as that frame's problem,
so random, truncated or oversized input never stops it serving.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

import zmq

from disagg_worker.transfer.rules.protocol import MAX_FRAME_BYTES

log = logging.getLogger(__name__)

Handler = Callable[[bytes], bytes | None]


class HandshakeTimeout(TimeoutError):
    """The peer did not answer within the timeout."""


def load_secret(path: str | None) -> bytes | None:
    """Shared handshake secret from ``DISAGG_HMAC_SECRET_PATH`` (None when unset)."""
    if path is None:
        return None
    try:
        secret = Path(path).read_bytes().strip()
    except OSError as e:
        raise ValueError(
            f"DISAGG_HMAC_SECRET_PATH: cannot read {path!r} ({e.strerror}); mount the "
            "handshake secret there or unset the variable"
        ) from None
    if not secret:
        raise ValueError(f"DISAGG_HMAC_SECRET_PATH: {path!r} is empty; put a random secret in it")
    return secret


def _url(host: str, port: int) -> str:
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


class HandshakeServer:
    """ROUTER socket served by one daemon thread; ``handler(frame) -> reply | None``."""

    def __init__(
        self, host: str, port: int, handler: Handler, *, max_frame: int = MAX_FRAME_BYTES
    ) -> None:
        self._handler = handler
        self._ctx = zmq.Context()
        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.MAXMSGSIZE, max_frame + 64)
        self._sock.setsockopt(zmq.SNDTIMEO, 1000)
        self._sock.setsockopt(zmq.ROUTER_MANDATORY, 0)
        if ":" in host:
            self._sock.setsockopt(zmq.IPV6, 1)
        try:
            if port == 0:
                self.port = self._sock.bind_to_random_port(_url(host, 0).rsplit(":", 1)[0])
            else:
                self._sock.bind(_url(host, port))
                self.port = port
        except zmq.ZMQError as e:
            self._sock.close(linger=0)
            self._ctx.term()
            raise OSError(
                f"DISAGG_SIDE_CHANNEL_PORT: cannot listen on {host}:{port} ({e}); pick a free "
                "port (0 = any) or fix DISAGG_SIDE_CHANNEL_HOST"
            ) from None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="kv-handshake", daemon=True)
        self.served = 0
        self.dropped = 0

    def start(self) -> None:
        self._thread.start()

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            try:
                if not poller.poll(100):
                    continue
                parts = self._sock.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError as e:
                if self._stop.is_set():
                    return
                log.debug("handshake recv: %s", e)
                continue
            self._answer(parts)

    def _answer(self, parts: list[bytes]) -> None:
        # a REQ peer sends [identity, b"", payload]; anything else is not ours to answer
        if len(parts) != 3 or parts[1] != b"":
            self.dropped += 1
            return
        try:
            reply = self._handler(parts[2])
        except Exception:  # a handler bug must not kill the listener
            log.exception("handshake handler failed")
            reply = None
        if reply is None:
            self.dropped += 1
            return
        try:
            self._sock.send_multipart([parts[0], b"", reply])
            self.served += 1
        except zmq.ZMQError as e:
            log.debug("handshake send: %s", e)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self._sock.close(linger=0)
        self._ctx.term()


def _req_socket(ctx: zmq.Context[zmq.Socket[bytes]], host: str, port: int) -> zmq.Socket[bytes]:
    sock: zmq.Socket[bytes] = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES + 64)
    if ":" in host:
        sock.setsockopt(zmq.IPV6, 1)
    sock.connect(_url(host, port))
    return sock


def _exchange(sock: zmq.Socket[bytes], frame: bytes, timeout_s: float, where: str) -> bytes:
    ms = max(1, int(timeout_s * 1000))
    sock.setsockopt(zmq.RCVTIMEO, ms)
    sock.setsockopt(zmq.SNDTIMEO, ms)
    try:
        sock.send(frame)
        return sock.recv()
    except zmq.Again:
        raise HandshakeTimeout(
            f"no handshake reply from {where} within {timeout_s:.1f} s"
        ) from None


def request(
    ctx: zmq.Context[zmq.Socket[bytes]], host: str, port: int, frame: bytes, timeout_s: float
) -> bytes:
    """Send one frame and wait for one reply; HandshakeTimeout after ``timeout_s``."""
    sock = _req_socket(ctx, host, port)
    try:
        return _exchange(sock, frame, timeout_s, f"{host}:{port}")
    finally:
        sock.close(linger=0)


class Channel:
    """Kept-open REQ sockets to one peer, for requests made on every transfer (claims).

    A fresh connection costs a TCP and ZMTP handshake per request; here each concurrent
    caller takes an idle socket (or opens one) and returns it after a clean reply. A
    socket whose request failed or timed out is closed (a REQ socket is stuck after a
    missing reply). Thread-safe; :meth:`close` before terminating the context.
    """

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], host: str, port: int) -> None:
        self._ctx, self._host, self._port = ctx, host, port
        self._lock = threading.Lock()
        self._idle: list[zmq.Socket[bytes]] = []
        self._closed = False

    def request(self, frame: bytes, timeout_s: float) -> bytes:
        with self._lock:
            if self._closed:
                raise zmq.ZMQError(zmq.ETERM, "side channel closed")
            sock = self._idle.pop() if self._idle else None
        if sock is None:
            sock = _req_socket(self._ctx, self._host, self._port)
        ok = False
        try:
            reply = _exchange(sock, frame, timeout_s, f"{self._host}:{self._port}")
            ok = True
            return reply
        finally:
            with self._lock:
                keep = ok and not self._closed
                if keep:
                    self._idle.append(sock)
            if not keep:
                sock.close(linger=0)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for sock in idle:
            sock.close(linger=0)
