"""Prefill side of a push: decode's claim answered, then the held blocks WRITTEN into
decode's, the notification riding on the WRITE.

Effectful layer (NIXL through :class:`NixlAgent`; the claim is the :class:`BlockHolder`'s).
Why a push: over UCX's tcp transport a READ is a GET that UCX emulates in software on
the serving side, while a WRITE (a PUT) is zero-copy; a prefill that writes moves the KV
at the rate a WRITE gets (docs/derivation.md, "UCX over TCP").

:meth:`PushWriter.accept` runs on the side-channel thread: it answers the claim as a
:class:`protocol.Claim` is answered (the lease then covers the push's deadline and a
margin), loads decode's agent once (kept, up to :data:`MAX_TARGETS`), checks decode's
geometry against ours, posts the WRITE and answers at once; it never waits for the bytes.
:meth:`PushWriter.tick` runs on the holder's thread: a WRITE that is DONE releases its
handle and the blocks (reason ``pushed``); one that failed or outlived the push's
deadline is released (aborted) and the blocks stay held until decode's failure releases
them or the lease ends. A hold released while its WRITE is in flight (the decode hop
failed) is freed only once the WRITE's handle is released, so no block is reused while
NIXL may still read it. Decode waits for the notification a margin past the same deadline,
so a WRITE given up here never lands in blocks decode has reused.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from disagg_worker.transfer.nixl_agent import NixlAgent, RemotePeer
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.rules.plan import PlanError, plan_read

log = logging.getLogger(__name__)

MAX_TARGETS = 64  # decode agents kept loaded (the least recently pushed to is unloaded)


@dataclass
class _Write:
    request_id: str
    handle: Any
    target: str  # decode's agent name
    until: float  # monotonic: given up (aborted) past this
    cancelled: bool = False  # the hold was released meanwhile: free the blocks when ended


class PushWriter:
    """The WRITEs a prefill posts for pushes, and the decode agents they go to."""

    def __init__(self, agent: NixlAgent, layout: KVLayout) -> None:
        self._agent, self._layout = agent, layout
        self._twins = tuple((i, i) for i in range(layout.num_regions))
        self._lock = threading.Lock()
        self._targets: OrderedDict[str, tuple[bytes, RemotePeer]] = OrderedDict()
        self._writes: dict[str, _Write] = {}

    # --- side-channel thread ----------------------------------------------------------

    def accept(
        self, msg: protocol.Push, claim: protocol.ClaimAnswer, received: float
    ) -> protocol.PushAnswer:
        """Post the WRITE for a push whose claim was answered ``claim`` (``received``: the
        monotonic time the frame came in, from which the push's deadline runs)."""
        if not claim.held:
            return protocol.PushAnswer(claim, False)
        rid = msg.claim.request_id
        problem = self._problem(msg)
        if problem:
            return protocol.PushAnswer(claim, False, problem)
        try:
            plan = plan_read(
                regions=self._twins,
                block_len=self._layout.block_len,
                local_num_blocks=self._layout.num_blocks,
                remote_num_blocks=msg.target.num_blocks,
                local_ids=msg.claim.block_ids,
                remote_ids=msg.dest_ids,
                merge=msg.merge,
            )
            peer = self._target(msg.target)
            handle, _ = self._agent.post_read(
                peer,
                plan,
                protocol.PUSH_NOTIF_PREFIX + rid.encode(),
                mode="prepped",
                merge=msg.merge,
                op="WRITE",
            )
        except PlanError as e:
            return protocol.PushAnswer(claim, False, f"bad block ids: {e}")
        except Exception as e:  # NIXL: decode's agent did not load, or the post failed
            self._drop(msg.target.agent_name)
            return protocol.PushAnswer(claim, False, f"WRITE not posted: {type(e).__name__}: {e}")
        with self._lock:
            self._writes[rid] = _Write(rid, handle, peer.name, received + msg.claim.deadline_s)
        return protocol.PushAnswer(claim, True)

    def _problem(self, msg: protocol.Push) -> str:
        """Why decode's blocks cannot take ours ("" when they can): its compatibility was
        checked by decode at handshake; here only what the WRITE itself relies on."""
        t, lay = msg.target, self._layout
        with self._lock:
            if msg.claim.request_id in self._writes:
                return f"request {msg.claim.request_id} is being pushed already"
        if t.block_len != lay.block_len:
            return f"decode's block_len {t.block_len} != {lay.block_len}"
        if len(t.region_addrs) != lay.num_regions:
            return f"decode registers {len(t.region_addrs)} regions, this prefill {lay.num_regions}"
        if len(msg.dest_ids) != len(msg.claim.block_ids):
            return f"{len(msg.dest_ids)} destination blocks for {len(msg.claim.block_ids)}"
        return ""

    def _target(self, t: protocol.PushTarget) -> RemotePeer:
        """Decode's agent, loaded once per name and metadata (a restarted decode has new
        metadata under its name: the old one is unloaded first)."""
        with self._lock:
            known = self._targets.get(t.agent_name)
            if known is not None and known[0] == t.agent_metadata:
                self._targets.move_to_end(t.agent_name)
                return known[1]
        if known is not None:
            self._drop(t.agent_name)
        peer = self._agent.add_peer(
            t.agent_metadata, list(t.region_addrs), t.block_len, t.num_blocks, t.device_id
        )
        if peer.name != t.agent_name:
            self._agent.remove_peer(peer)
            raise ValueError(f"the metadata names agent {peer.name}, not {t.agent_name}")
        with self._lock:
            self._targets[t.agent_name] = (t.agent_metadata, peer)
            old = self._lru_victim()
        if old is not None:
            self._agent.remove_peer(old)
        return peer

    def _lru_victim(self) -> RemotePeer | None:
        """The least recently used target past :data:`MAX_TARGETS` with no WRITE in flight."""
        if len(self._targets) <= MAX_TARGETS:
            return None
        busy = {w.target for w in self._writes.values()}
        for name in self._targets:
            if name not in busy:
                return self._targets.pop(name)[1]
        return None

    def _drop(self, name: str) -> None:
        with self._lock:
            busy = any(w.target == name for w in self._writes.values())
            found = None if busy else self._targets.pop(name, None)
        if found is not None:
            self._agent.remove_peer(found[1])

    # --- holder thread ----------------------------------------------------------------

    def busy(self) -> bool:
        with self._lock:
            return bool(self._writes)

    def cancel(self, request_id: str) -> bool:
        """The hold of ``request_id`` is released while its WRITE runs: abort the WRITE at
        the next tick and free the blocks then. False when no WRITE of it is in flight."""
        with self._lock:
            w = self._writes.get(request_id)
            if w is not None:
                w.cancelled = True
            return w is not None

    def tick(self, now: float) -> list[tuple[str, str]]:
        """Settle the WRITEs that ended: ``(request_id, outcome)`` for each, outcome
        ``pushed`` (DONE: free the blocks), ``cancelled`` (free them now), ``failed`` or
        ``expired`` (keep them held: decode's failure or the lease frees them)."""
        with self._lock:
            writes = list(self._writes.values())
        ended: list[tuple[str, str]] = []
        for w in writes:
            try:
                state = self._agent.state(w.handle)
            except Exception as e:
                log.debug("push %s: check_xfer_state: %s", w.request_id, e)
                state = "ERR"
            if state == "DONE":
                outcome = "pushed"
            elif w.cancelled:
                outcome = "cancelled"
            elif state == "ERR":
                outcome = "failed"
            elif now > w.until:
                outcome = "expired"
            else:
                continue
            released = self._agent.release(w.handle)
            with self._lock:
                self._writes.pop(w.request_id, None)
            if outcome in ("failed", "expired"):
                log.info("push of %s %s (WRITE released: %s)", w.request_id, outcome, released)
                if outcome == "failed":
                    self._drop(w.target)
            ended.append((w.request_id, outcome))
        return ended

    def close(self) -> None:
        """Release every WRITE still in flight (the agent unloads the targets)."""
        with self._lock:
            writes, self._writes = list(self._writes.values()), {}
            self._targets.clear()
        for w in writes:
            self._agent.release(w.handle)
