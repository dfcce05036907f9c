"""Prefill side of a transfer: published blocks, their leases, claims and releases.

Effectful layer (a daemon thread polls NIXL notifications; the decisions are the pure
:class:`LeaseTable`'s). :meth:`BlockHolder.hold` records a published request; decode's
claim (over the side channel, before it posts its READ) is answered from the table and
extends a held lease to cover the read; the READ's notification, or the lease running
out, releases the blocks: ``on_release(request_id, block_ids, reason)`` runs on the
notification thread with reason ``notified`` or ``lease_expired``, or on the caller's with
``aborted`` (:meth:`BlockHolder.release`: the decode hop failed). A push (decode asks the
prefill to WRITE the blocks, :mod:`pushes`) is claimed here too; its WRITE is settled on
the notification thread, which then frees the blocks with reason ``pushed``, and a hold
released while its WRITE runs is freed (``aborted``) only once the WRITE has ended.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from disagg_worker.transfer.pushes import PushWriter
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.leases import LeaseTable
from disagg_worker.transfer.telemetry import TransferTelemetry

log = logging.getLogger(__name__)

ReleaseCallback = Callable[[str, list[int], str], None]
Poll = Callable[[], dict[str, list[bytes]]]
NOTIF_PREFIX = b"r:"  # decode's READ notification: b"r:" + request id (utf-8)
# A claimed lease outlives decode's deadline by this much: a READ given up at its deadline
# may still be finishing in the transport when decode releases the handle.
CLAIM_MARGIN_S = 1.0


class BlockHolder:
    """The lease table plus the thread that releases its entries (see module docstring)."""

    def __init__(
        self, poll: Poll, telemetry: TransferTelemetry, on_release: ReleaseCallback | None
    ) -> None:
        self._poll, self._telemetry, self._on_release = poll, telemetry, on_release
        self.writer: PushWriter | None = None  # set to accept pushes
        self.leases = LeaseTable()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="kv-notifs", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def hold(self, request_id: str, block_ids: list[int], lease_s: float, digest: str = "") -> None:
        self.leases.hold(request_id, list(block_ids), time.monotonic() + lease_s, digest)
        self._telemetry.held.set(len(self.leases))

    def release(self, request_id: str) -> bool:
        """Free a hold now (decode failed or the client left; told by the proxy). False
        when nothing is held under that id (already read, expired or never published)."""
        if self.writer is not None and self.writer.cancel(request_id):
            return True  # freed once its WRITE has ended (the next pass of the loop)
        ids = self.leases.pop(request_id)
        self._release(request_id, ids, "aborted")
        return ids is not None

    def claim(self, msg: protocol.Claim) -> protocol.ClaimAnswer:
        """Answer decode's claim atomically from the lease table."""
        now = time.monotonic()
        until = now + msg.deadline_s + CLAIM_MARGIN_S
        res = self.leases.claim(msg.request_id, msg.block_ids, now, until, msg.prompt_digest)
        if not res.held:
            log.info("claim of %s refused: %s", msg.request_id, res.reason)
        left = round(res.expires - now, 3) if res.expires else 0.0
        return protocol.ClaimAnswer(
            msg.request_id, res.held, res.reason, left, list(res.held_ids), msg.nonce
        )

    def push(self, msg: protocol.Push) -> protocol.PushAnswer:
        """Answer a push: its claim, then its WRITE posted (see :mod:`pushes`)."""
        received = time.monotonic()
        if self.writer is None:
            raise RuntimeError("push answered by a holder without a writer")
        return self.writer.accept(msg, self.claim(msg.claim), received)

    def _pause(self) -> float:
        """Between passes: short while a WRITE is in flight (each pass drives it on),
        longer while blocks are held, longest when idle."""
        if self.writer is not None and self.writer.busy():
            return 0.00002
        return 0.0005 if len(self.leases) else 0.002

    def _settle_pushes(self) -> None:
        if self.writer is None:
            return
        for rid, outcome in self.writer.tick(time.monotonic()):
            self._telemetry.record_push(outcome)
            if outcome in ("pushed", "cancelled"):
                reason = "pushed" if outcome == "pushed" else "aborted"
                self._release(rid, self.leases.pop(rid), reason)

    def _loop(self) -> None:
        while not self._stop.wait(self._pause()):
            self._settle_pushes()
            try:
                notifs = self._poll()
            except Exception as e:  # keep serving; a broken agent shows up in reads
                log.debug("notification poll: %s", e)
                notifs = {}
            for msgs in notifs.values():
                for m in msgs:
                    if m.startswith(NOTIF_PREFIX):
                        rid = m[len(NOTIF_PREFIX) :].decode("utf-8", "replace")
                        self._release(rid, self.leases.pop(rid), "notified")
            for rid, ids in self.leases.expire(time.monotonic()):
                self._release(rid, ids, "lease_expired")

    def _release(self, request_id: str, block_ids: list[int] | None, reason: str) -> None:
        if block_ids is None:  # lease already expired, or a probe's read
            return
        self._telemetry.record_release(reason)
        self._telemetry.held.set(len(self.leases))
        if self._on_release is not None:
            try:
                self._on_release(request_id, block_ids, reason)
            except Exception:
                log.exception("on_release(%s) failed", request_id)
