"""Decode side of the handshake: fetch, check and cache each prefill peer's metadata.

Effectful layer (zmq side channel + NIXL remote agents). One handshake per peer, guarded
by a per-peer lock so concurrent reads do not handshake twice; a peer is refused by name
on version, layout, memory type, TP size, engine id or HMAC mismatch, and forgotten when a
transfer suggests it died or restarted, so the next request handshakes afresh. Before each
READ, :meth:`PeerDirectory.claim` asks the peer (one side-channel round trip) whether it
still holds the request's blocks; when it does not, the READ is never posted.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import zmq

from disagg_worker.transfer import handshake, protocol
from disagg_worker.transfer.layout import KVLayout
from disagg_worker.transfer.nixl_agent import NixlAgent, RemotePeer

HANDSHAKE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class PeerRef:
    """Where a prefill worker's side channel listens; engine_id checked when given."""

    host: str
    port: int
    engine_id: str = ""

    def __str__(self) -> str:
        name = f" ({self.engine_id})" if self.engine_id else ""
        return f"{self.host}:{self.port}{name}"


class TransferError(RuntimeError):
    """A request's transfer failed; the message names the cause and the peer.

    ``reason`` is the failure counter's label: handshake, incompatible, plan, claim,
    expired, not_held, nixl_error, deadline, closed.
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class PeerEntry:
    meta: protocol.PeerMetadata
    remote: RemotePeer


class PeerDirectory:
    """host:port → checked, loaded peer."""

    def __init__(
        self,
        agent: NixlAgent,
        codec: protocol.Codec,
        *,
        layout: KVLayout,
        memory_type: str,
        tp_size: int,
        engine_id: str,
    ) -> None:
        self._agent, self._codec = agent, codec
        self._layout, self._memory_type, self._tp_size = layout, memory_type, tp_size
        self._engine_id = engine_id
        self._compat = protocol.compat_hash(layout, memory_type, tp_size)
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._lock = threading.Lock()
        self._peers: dict[tuple[str, int], PeerEntry] = {}
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._channels: dict[tuple[str, int], handshake.Channel] = {}

    def get(self, peer: PeerRef, deadline: float) -> tuple[PeerEntry, float]:
        """(entry, handshake ms — 0.0 when cached)."""
        key = (peer.host, peer.port)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            entry = self._peers.get(key)
            if entry is not None and peer.engine_id in ("", entry.meta.engine_id):
                return entry, 0.0
            if entry is not None:  # another engine answers there now (restarted pod)
                self.forget(peer, entry, remove=True)
            t0 = time.perf_counter()
            entry = self._handshake(peer, deadline)
            self._peers[key] = entry
        return entry, (time.perf_counter() - t0) * 1000

    def forget(self, peer: PeerRef, entry: PeerEntry, *, remove: bool) -> None:
        """Drop the cached entry; ``remove`` also unloads the NIXL remote agent (only safe
        once no transfer handle towards it is alive)."""
        with self._lock:
            if self._peers.get((peer.host, peer.port)) is entry:
                del self._peers[(peer.host, peer.port)]
        if remove:
            self._agent.remove_peer(entry.remote)

    def close(self) -> None:
        """Close the side-channel client sockets (remote agents go with the NIXL agent)."""
        with self._lock:
            self._peers.clear()
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()
        self._ctx.term()

    def _handshake(self, peer: PeerRef, deadline: float) -> PeerEntry:
        meta = self._fetch(peer, deadline)
        problems = protocol.mismatches(self._layout, self._memory_type, self._tp_size, meta)
        if peer.engine_id and meta.engine_id != peer.engine_id:
            problems.append(f"engine_id {peer.engine_id} != {meta.engine_id}")
        if problems:
            raise TransferError(
                f"peer {peer} is incompatible: {'; '.join(problems)}", "incompatible"
            )
        try:
            remote = self._agent.add_peer(
                meta.agent_metadata,
                meta.region_addrs,
                meta.block_len,
                meta.layout.num_blocks,
                meta.device_id,
            )
        except Exception as e:
            raise TransferError(
                f"loading NIXL metadata of {peer} failed: {e}", "handshake"
            ) from None
        return PeerEntry(meta, remote)

    def _fetch(self, peer: PeerRef, deadline: float) -> protocol.PeerMetadata:
        nonce = os.urandom(16)
        req = protocol.MetadataRequest(self._engine_id, self._compat, nonce)
        timeout = min(HANDSHAKE_TIMEOUT_S, max(0.01, deadline - time.perf_counter()))
        try:
            frame = self._codec.encode(req)
            raw = handshake.request(self._ctx, peer.host, peer.port, frame, timeout)
            msg = self._codec.decode(raw)
        except (handshake.HandshakeTimeout, zmq.ZMQError) as e:
            raise TransferError(f"handshake with {peer} failed: {e}", "handshake") from None
        except protocol.ProtocolError as e:
            raise TransferError(f"handshake with {peer} refused: {e}", "handshake") from None
        if isinstance(msg, protocol.Refusal):
            raise TransferError(f"peer {peer} refused the handshake: {msg.reason}", "handshake")
        if not isinstance(msg, protocol.PeerMetadata) or msg.nonce != nonce:
            raise TransferError(f"peer {peer} sent a reply to another request", "handshake")
        return msg

    def claim(
        self, peer: PeerRef, entry: PeerEntry, rid: str, block_ids: list[int], deadline: float
    ) -> float:
        """Claim ``block_ids`` of ``rid`` from the peer before reading them: the peer extends
        its lease to cover ``deadline``. Returns the round trip (ms); TransferError if the
        peer does not hold them (see :func:`claim_refused`) or does not answer."""
        t0 = time.perf_counter()
        left = deadline - t0
        if left <= 0:
            raise TransferError(
                f"request {rid} from {peer}: deadline passed before the claim", "deadline"
            )
        nonce = os.urandom(16)
        req = protocol.Claim(rid, block_ids, min(left, protocol.MAX_CLAIM_DEADLINE_S), nonce)
        try:
            frame = self._codec.encode(req)
            raw = self._channel(peer).request(frame, min(HANDSHAKE_TIMEOUT_S, left))
            msg = self._codec.decode(raw)
        except (handshake.HandshakeTimeout, zmq.ZMQError) as e:
            self.forget(peer, entry, remove=True)  # it may have died or restarted
            raise TransferError(
                f"claiming request {rid} from {peer} failed: {e}; peer forgotten", "claim"
            ) from None
        except protocol.ProtocolError as e:
            raise TransferError(f"claim of request {rid} to {peer} failed: {e}", "claim") from None
        if isinstance(msg, protocol.Refusal):
            raise TransferError(f"peer {peer} refused the claim of {rid}: {msg.reason}", "claim")
        if not isinstance(msg, protocol.ClaimAnswer) or (msg.nonce, msg.request_id) != (nonce, rid):
            raise TransferError(f"peer {peer} sent an answer to another claim than {rid}", "claim")
        if not msg.held:
            raise claim_refused(peer, msg, block_ids)
        return (time.perf_counter() - t0) * 1000

    def _channel(self, peer: PeerRef) -> handshake.Channel:
        key = (peer.host, peer.port)
        with self._lock:
            if key not in self._channels:
                self._channels[key] = handshake.Channel(self._ctx, peer.host, peer.port)
            return self._channels[key]


def claim_refused(peer: PeerRef, ans: protocol.ClaimAnswer, wanted: list[int]) -> TransferError:
    """The error for a claim the peer answered "not held": what happened and what to do."""
    head = f"request {ans.request_id} from {peer}: nothing was read, "
    if ans.reason == "expired":
        return TransferError(
            f"{head}the prefill's lease ran out {-ans.expires_in_s:.2f} s before decode "
            "arrived (its blocks may already hold other data); raise blockLeaseSeconds "
            "(DISAGG_BLOCK_LEASE_S on prefill) or investigate the delay between prefill "
            "and decode",
            "expired",
        )
    if ans.reason == "released":
        why = "the prefill already released its blocks after an earlier read of it"
    elif ans.reason == "blocks_differ":
        why = f"the prefill holds blocks {_ids(ans.held_ids)} for it, not {_ids(wanted)}"
    else:
        why = (
            "the prefill holds no such request (never published there, or its lease ran "
            "out long ago); check remote_host/remote_port, or raise blockLeaseSeconds"
        )
    return TransferError(head + why, "not_held")


def _ids(ids: list[int]) -> str:
    return str(ids) if len(ids) <= 16 else f"{ids[:16]} … ({len(ids)} blocks)"
