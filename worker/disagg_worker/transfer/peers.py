"""Decode side of the handshake: fetch, check and cache each prefill peer's metadata.

Effectful layer (zmq side channel + NIXL remote agents). One handshake per peer, under a
per-peer lock so concurrent reads do not handshake twice and peers never share one; a
mismatch is refused by name, and a peer is forgotten when a transfer suggests it died or
restarted. :meth:`PeerDirectory.claim` and :meth:`PeerDirectory.push` are the round trip
before each READ or push. Isolation (connect first, back-off, incarnations): a dead or
hung peer costs only the requests that name it; docs/worker.md (Faults and load).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass

import zmq

from disagg_contract.backoff import doubling
from disagg_worker.transfer import handshake
from disagg_worker.transfer.nixl_agent import NixlAgent, RemotePeer
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout

HANDSHAKE_TIMEOUT_S = 5.0
BACKOFF_FIRST_S = 1.0  # after a failed handshake; doubled per further failure
BACKOFF_MAX_S = 30.0


@dataclass(frozen=True)
class PeerRef:
    """Where a prefill worker's side channel listens; engine_id checked when given, and
    ``incarnation`` (the prefill engine's, new at every start) when given."""

    host: str
    port: int
    engine_id: str = ""
    incarnation: str = ""

    def __str__(self) -> str:
        name = f" ({self.engine_id})" if self.engine_id else ""
        return f"{self.host}:{self.port}{name}"


class TransferError(RuntimeError):
    """A request's transfer failed; the message names the cause and the peer.

    ``reason`` is the failure counter's label: handshake, unreachable, backoff,
    incompatible, plan, claim, expired, not_held, prompt_differs, nixl_error, deadline,
    closed.
    """

    def __init__(self, message: str, reason: str = "error") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class PeerEntry:
    """A loaded peer; ``users`` counts the requests holding it (see :meth:`done`)."""

    meta: protocol.PeerMetadata
    remote: RemotePeer
    users: int = 0
    retired: bool = False  # forgotten: unload the remote agent when the last user is done
    removable: bool = True  # False when a transfer handle towards it could not be released


@dataclass
class PeerBackoff:
    """A peer whose handshake failed: requests naming ``incarnation`` fail until ``until``."""

    incarnation: str
    until: float
    failures: int
    cause: str = ""


def backoff_delay(failures: int) -> float:
    """Seconds to leave a peer alone after its ``failures``-th failed handshake in a row."""
    return doubling(failures, BACKOFF_FIRST_S, BACKOFF_MAX_S)


class PeerDirectory:
    """host:port → checked, loaded peer."""

    def __init__(
        self,
        agent: NixlAgent,
        codec: protocol.Codec,
        *,
        layout: KVLayout,
        memory_type: str,
        model_kv_heads: int,
        engine_id: str,
    ) -> None:
        self._agent, self._codec = agent, codec
        self._layout, self._memory_type, self._heads = layout, memory_type, model_kv_heads
        self._engine_id = engine_id
        self._compat = protocol.compat_hash(layout, memory_type, model_kv_heads)
        self._ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._lock = threading.Lock()
        self._peers: dict[tuple[str, int], PeerEntry] = {}
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._channels: dict[tuple[str, int], handshake.Channel] = {}
        self._backoff: dict[tuple[str, int], PeerBackoff] = {}

    def get(self, peer: PeerRef, deadline: float) -> tuple[PeerEntry, float]:
        """(entry, handshake ms — 0.0 when cached); the caller calls :meth:`done` after."""
        key = (peer.host, peer.port)
        self._check_backoff(peer)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        if not lock.acquire(timeout=max(0.0, deadline - time.perf_counter())):
            raise TransferError(
                f"request deadline passed while another request handshook with {peer}",
                "deadline",
            )
        try:
            entry = self._peers.get(key)
            if entry is not None and _matches(peer, entry):
                return self._use(entry), 0.0
            self._check_backoff(peer)  # the handshake we waited for may just have failed
            if entry is not None:  # another engine or incarnation answers there now
                self.forget(peer, entry, remove=True)
            t0 = time.perf_counter()
            entry = self._handshake_or_back_off(peer, deadline)
            self._peers[key] = entry
            return self._use(entry), (time.perf_counter() - t0) * 1000
        finally:
            lock.release()

    def _use(self, entry: PeerEntry) -> PeerEntry:
        with self._lock:
            entry.users += 1
        return entry

    def done(self, entry: PeerEntry) -> None:
        """A request is finished with ``entry``: a retired peer is unloaded by its last user."""
        with self._lock:
            entry.users -= 1
            unload = entry.retired and entry.users == 0 and entry.removable
        if unload:
            self._agent.remove_peer(entry.remote)

    def forget(self, peer: PeerRef, entry: PeerEntry, *, remove: bool) -> None:
        """Drop the cached entry, so the next request handshakes afresh. Its NIXL remote
        agent is unloaded once no request uses it, and only when ``remove`` (a transfer
        handle that could not be released keeps it loaded)."""
        with self._lock:
            if self._peers.get((peer.host, peer.port)) is entry:
                del self._peers[(peer.host, peer.port)]
            first = not entry.retired
            entry.retired = True
            entry.removable = entry.removable and remove
            unload = first and entry.users == 0 and entry.removable
        if unload:
            self._agent.remove_peer(entry.remote)

    def _check_backoff(self, peer: PeerRef) -> None:
        with self._lock:
            off = self._backoff.get((peer.host, peer.port))
        if off is None or off.incarnation != peer.incarnation:
            return
        left = off.until - time.monotonic()
        if left > 0:
            raise TransferError(
                f"prefill {peer} failed {off.failures} handshake(s) in a row (last: "
                f"{off.cause}); backing off for {left:.1f} s more",
                "backoff",
            )

    def _handshake_or_back_off(self, peer: PeerRef, deadline: float) -> PeerEntry:
        key = (peer.host, peer.port)
        try:
            entry = self._handshake(peer, deadline)
        except TransferError as e:
            if e.reason in ("handshake", "unreachable"):
                with self._lock:
                    old = self._backoff.get(key)
                    same = old is not None and old.incarnation == peer.incarnation
                    failures = old.failures + 1 if same and old is not None else 1
                    until = time.monotonic() + backoff_delay(failures)
                    self._backoff[key] = PeerBackoff(peer.incarnation, until, failures, str(e))
            raise
        with self._lock:
            self._backoff.pop(key, None)
        return entry

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
        problems = protocol.mismatches(self._layout, self._memory_type, self._heads, meta)
        if peer.engine_id and meta.engine_id != peer.engine_id:
            problems.append(f"engine_id {peer.engine_id} != {meta.engine_id}")
        if peer.incarnation and meta.incarnation != peer.incarnation:
            # restarted again since it answered this request: its blocks are gone
            problems.append(f"incarnation {peer.incarnation} != {meta.incarnation}")
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
        _reachable(peer, timeout)
        try:
            frame = self._codec.encode(req)
            raw = handshake.request(self._ctx, peer.host, peer.port, frame, timeout)
            msg = self._codec.decode(raw)
        except (handshake.HandshakeTimeout, zmq.ZMQError) as e:
            raise TransferError(f"handshake with {peer} failed: {e}", "handshake") from None
        except protocol.ProtocolError as e:
            raise TransferError(f"handshake with {peer} refused: {e}", "handshake") from None
        if isinstance(msg, protocol.Refused):
            raise TransferError(f"peer {peer} refused the handshake: {msg.reason}", "handshake")
        if not isinstance(msg, protocol.PeerMetadata) or msg.nonce != nonce:
            raise TransferError(f"peer {peer} sent a reply to another request", "handshake")
        return msg

    def claim(
        self,
        peer: PeerRef,
        entry: PeerEntry,
        rid: str,
        block_ids: list[int],
        deadline: float,
        digest: str = "",
    ) -> float:
        """Claim ``block_ids`` of ``rid`` from the peer before reading them: the peer extends
        its lease to cover ``deadline``. Returns the round trip (ms); TransferError if the
        peer does not hold them (see :func:`claim_refused`) or does not answer."""
        t0 = time.perf_counter()
        req = self.claim_of(rid, block_ids, deadline - t0, digest)
        msg = self._ask(peer, entry, req, deadline, "claim")
        if not isinstance(msg, protocol.ClaimAnswer):
            raise TransferError(f"peer {peer} answered the claim of {rid} with {msg}", "claim")
        _check_answer(peer, req, msg)
        return (time.perf_counter() - t0) * 1000

    @staticmethod
    def claim_of(rid: str, block_ids: list[int], left: float, digest: str) -> protocol.Claim:
        """The claim of ``block_ids`` of ``rid`` for a transfer that may take ``left`` s."""
        wait = min(left, protocol.MAX_CLAIM_DEADLINE_S)
        return protocol.Claim(rid, block_ids, wait, os.urandom(16), digest)

    def push(self, peer: PeerRef, entry: PeerEntry, req: protocol.Push, deadline: float) -> None:
        """Ask the peer to WRITE ``req``'s blocks into ours (see :mod:`pushes`); returns once
        the WRITE is posted. TransferError when the claim is refused (as :meth:`claim`),
        the peer could not post the WRITE, or it does not answer."""
        rid = req.claim.request_id
        msg = self._ask(peer, entry, req, deadline, "push")
        if not isinstance(msg, protocol.PushAnswer):
            raise TransferError(f"peer {peer} answered the push of {rid} with {msg}", "claim")
        _check_answer(peer, req.claim, msg.answer)
        if not msg.posted:
            self.forget(peer, entry, remove=True)  # what it could not write may be our fault
            raise TransferError(
                f"prefill {peer} holds request {rid} but could not write it: {msg.error}",
                "nixl_error",
            )

    def _ask(
        self,
        peer: PeerRef,
        entry: PeerEntry,
        req: protocol.Claim | protocol.Push,
        deadline: float,
        what: str,
    ) -> protocol.Message:
        """One side-channel round trip on a kept-open socket, within ``deadline``; a
        deadline already passed, a Refused answer, a timeout or a frame that does not
        decode is a TransferError (the peer forgotten on a timeout)."""
        rid = req.request_id if isinstance(req, protocol.Claim) else req.claim.request_id
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TransferError(
                f"request {rid} from {peer}: deadline passed before the {what}", "deadline"
            )
        try:
            frame = self._codec.encode(req)
            raw = self._channel(peer).request(frame, min(HANDSHAKE_TIMEOUT_S, left))
            msg = self._codec.decode(raw)
        except (handshake.HandshakeTimeout, zmq.ZMQError) as e:
            self.forget(peer, entry, remove=True)  # it may have died or restarted
            raise TransferError(
                f"{what} of request {rid} from {peer} failed: {e}; peer forgotten", "claim"
            ) from None
        except protocol.ProtocolError as e:
            raise TransferError(f"{what} of request {rid} to {peer} failed: {e}", "claim") from None
        if isinstance(msg, protocol.Refused):
            raise TransferError(f"peer {peer} refused the {what} of {rid}: {msg.reason}", "claim")
        return msg

    def _channel(self, peer: PeerRef) -> handshake.Channel:
        key = (peer.host, peer.port)
        with self._lock:
            if key not in self._channels:
                self._channels[key] = handshake.Channel(self._ctx, peer.host, peer.port)
            return self._channels[key]


def _matches(peer: PeerRef, entry: PeerEntry) -> bool:
    """Whether a cached entry answers for ``peer`` (same engine and incarnation)."""
    meta = entry.meta
    return peer.engine_id in ("", meta.engine_id) and peer.incarnation in ("", meta.incarnation)


def _reachable(peer: PeerRef, timeout_s: float) -> None:
    """A plain TCP connect first: zmq would queue the handshake and wait out its timeout
    on a refused port; this fails at once (refused) or within ``timeout_s`` (unreachable)."""
    try:
        socket.create_connection((peer.host, peer.port), timeout=timeout_s).close()
    except OSError as e:
        what = "refused the connection" if isinstance(e, ConnectionRefusedError) else str(e)
        raise TransferError(f"prefill {peer} unreachable: {what}", "unreachable") from None


def _check_answer(peer: PeerRef, req: protocol.Claim, ans: protocol.ClaimAnswer) -> None:
    """The answer is to this claim, and says the blocks are held."""
    if (ans.nonce, ans.request_id) != (req.nonce, req.request_id):
        raise TransferError(
            f"peer {peer} sent an answer to another claim than {req.request_id}", "claim"
        )
    if not ans.held:
        raise claim_refused(peer, ans, req.block_ids)


def claim_refused(peer: PeerRef, ans: protocol.ClaimAnswer, wanted: list[int]) -> TransferError:
    """The error for a claim the peer answered "not held": what happened and what to do."""
    head = f"request {ans.request_id} from {peer}: its KV is not used (bytes read are dropped), "
    if ans.reason == "expired":
        return TransferError(
            f"{head}the prefill's lease ran out {-ans.expires_in_s:.2f} s before decode "
            "arrived (its blocks may already hold other data); raise blockLeaseSeconds "
            "(DISAGG_BLOCK_LEASE_S on prefill) or investigate the delay between prefill "
            "and decode",
            "expired",
        )
    if ans.reason == "prompt_differs":
        return TransferError(
            f"{head}the prefill computed these blocks for another prompt; send decode the "
            "prompt the prefill was given, with the kv_transfer_params it returned",
            "prompt_differs",
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
