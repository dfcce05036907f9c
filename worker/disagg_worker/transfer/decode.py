"""Decode side of a KV transfer: fetch the prefill's blocks by a READ, or receive its push.

Effectful layer, composing the pure planner (:mod:`plan`), the wire contract
(:mod:`protocol`), the peers (:mod:`peers`), READs (:mod:`reads`), a push's notification
(:mod:`mailbox`) and staging copies (:mod:`copy`) over this worker's registration. The
claim runs beside the READ, not before it (blocks held at the claim's answer were held over
the whole READ), so a request pays the longer of the two; every failure is a
:class:`TransferError` that leaves the worker healthy. Claims, push, errors: docs/worker.md.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from disagg_worker.transfer import reads
from disagg_worker.transfer.copy import copy_blocks
from disagg_worker.transfer.holder import NOTIF_PREFIX
from disagg_worker.transfer.mailbox import Mailbox
from disagg_worker.transfer.nixl_agent import NixlAgent, PostMode
from disagg_worker.transfer.peers import (
    HANDSHAKE_TIMEOUT_S,
    PeerDirectory,
    PeerEntry,
    PeerRef,
    TransferError,
)
from disagg_worker.transfer.registration import Registration
from disagg_worker.transfer.rules import protocol, ranks
from disagg_worker.transfer.rules.plan import PlanError, TransferPlan, plan_read

DEFAULT_POST_MODE: PostMode = "prepped"
CLAIM_THREADS = 16  # claims in flight beside their READs (each waits on one side channel)
FANOUT_THREADS = 16  # READs in flight from the several prefill ranks one read draws on
# decode waits for a push's notification this long past the deadline, by which prefill has
# given the WRITE up: bytes already on the wire then have landed
PUSH_MARGIN_S = 1.0


@dataclass(frozen=True)
class TransferStats:
    bytes: int
    descriptors: int
    handshake_ms: float  # 0.0 when the peer was cached
    post_ms: float
    transfer_ms: float
    total_ms: float
    claim_ms: float = 0.0  # the claim round trip (0.0 when nothing was claimed)
    pushed: bool = False  # the prefill wrote the blocks (a push), not a READ here


@dataclass(frozen=True)
class Read:
    """One request's READ, as decode asks it of :meth:`DecodeReader.read`: from ``peer``
    (the prefill engine's rank 0, as its kv_transfer_params name it), the blocks it holds
    under ``request_id`` into ours, within ``deadline_s`` (None: the configured transfer
    deadline). ``prompt_digest``: :func:`protocol.prompt_digest` of the prompt decode
    continues (the prefill refuses the claim for KV of another prompt). ``claim=False``
    skips the claim: blocks nobody published (the probe), or a decode rank whose rank 0
    claims for the whole request. ``notify=False``: prefill is not told the blocks are read
    (a decode rank whose rank 0 notifies once every rank is done: :meth:`notify`)."""

    peer: PeerRef
    request_id: str
    remote_block_ids: list[int]
    local_block_ids: list[int]
    deadline_s: float | None = None
    merge: bool = True
    claim: bool = True
    notify: bool = True
    prompt_digest: str = ""


_Source = tuple[PeerRef, PeerEntry, tuple[tuple[int, int], ...]]  # where, entry, region pairs
_Planned = tuple[PeerRef, PeerEntry, TransferPlan]


class DecodeReader:
    """The decode side over one registration (see module docstring)."""

    def __init__(self, registration: Registration, post_mode: PostMode = DEFAULT_POST_MODE) -> None:
        self._reg = registration
        self.post_mode = post_mode
        self._twins = tuple((i, i) for i in range(registration.layout.num_regions))
        self._pool: ThreadPoolExecutor | None = None
        self._peers: PeerDirectory | None = None
        self._mailbox: Mailbox | None = None
        self._target: protocol.PushTarget | None = None
        # claims run here beside their READs (threads start only when a decode claims)
        self._claims = ThreadPoolExecutor(CLAIM_THREADS, thread_name_prefix="kv-claim")
        self._fanout = ThreadPoolExecutor(FANOUT_THREADS, thread_name_prefix="kv-fanout")

    # --- lifetime (driven by the agent) ----------------------------------------------

    def start(self, agent: NixlAgent) -> None:
        """The READ threads (with DISAGG_NIXL_THREADS > 1), the peer directory, and on a
        decode that pushes the mailbox of its notifications."""
        cfg, reg = self._reg.config, self._reg
        if cfg.nixl_threads > 1:
            self._pool = ThreadPoolExecutor(cfg.nixl_threads, thread_name_prefix="kv-read")
        self._peers = PeerDirectory(
            agent,
            reg.codec,
            layout=reg.layout,
            memory_type=cfg.memory_type,
            model_kv_heads=reg.model_kv_heads,
            engine_id=cfg.engine_id,
        )
        # a "both" worker's holder takes every notification of its one agent: it reads
        if cfg.role == "decode" and cfg.transfer_mode == "push":
            self._mailbox = Mailbox(agent.notifications)

    def stop(self) -> None:
        """Before the NIXL agent closes: the threads that post and wait (each ends by its
        deadline or timeout)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # parts in flight end by their deadline
        self._claims.shutdown(wait=True)  # claims end by their timeout
        self._fanout.shutdown(wait=True)  # reads end by their deadline

    def close(self) -> None:
        """After the NIXL agent: the side-channel client sockets."""
        if self._peers is not None:
            self._peers.close()

    def _directory(self) -> PeerDirectory:
        if self._peers is None or self._reg.closed:
            raise TransferError("transfer agent is not running (start() it first)", "closed")
        return self._peers

    def _peer(self, peer: PeerRef, deadline: float) -> tuple[PeerEntry, float]:
        entry, ms = self._directory().get(peer, deadline)
        if ms:
            self._reg.telemetry.record_handshake(ms)
        return entry, ms

    # --- reading ----------------------------------------------------------------------

    def read(self, req: Read) -> TransferStats:
        """READ remote blocks into local blocks (:class:`Read`); blocking, thread-safe,
        never hangs. This rank reads its KV heads from the prefill ranks that hold them
        (:func:`ranks.sources`), all in parallel."""
        reg, peer = self._reg, req.peer
        t0 = time.perf_counter()
        limit_s = req.deadline_s if req.deadline_s is not None else reg.config.transfer_deadline_s
        deadline = t0 + limit_s
        entries: list[PeerEntry] = []
        try:
            entry0, hs_ms = self._peer(peer, deadline)
            entries.append(entry0)
            found, more_ms = self._sources(peer, entry0, entries, deadline)
            hs_ms += more_ms
            ids = (req.remote_block_ids, req.local_block_ids)
            plans = [(p, e, self._plan(e, regions, *ids, req.merge)) for p, e, regions in found]
            nbytes = sum(plan.bytes for _, _, plan in plans)
            if nbytes == 0:  # nothing to move (e.g. all cached): just free prefill's
                # hold; no claim, since no bytes can be read wrong (a late notify is ignored)
                if req.notify:
                    self._notify(peer, entry0, req.request_id)
                return TransferStats(0, 0, hs_ms, 0.0, 0.0, (time.perf_counter() - t0) * 1000)
            pushed = self._pushable(plans, entry0, req)
            if pushed:
                post_ms, xfer_ms = self._push(req, entry0, deadline)
                ndesc, claim_ms = plans[0][2].descriptors, post_ms
            else:
                post_ms, xfer_ms, ndesc, claim_ms = self._claim_and_read(
                    req, entry0, plans, deadline
                )
            if reg.staged:
                copy_blocks(reg.buffer, reg.caches, req.local_block_ids)
        except TransferError as e:
            reg.telemetry.record_failure(e.reason)
            raise
        finally:
            for entry in entries:
                self._directory().done(entry)
        total = (time.perf_counter() - t0) * 1000
        reg.telemetry.record_transfer(
            nbytes=nbytes, descriptors=ndesc, post_ms=post_ms, transfer_ms=xfer_ms, pushed=pushed
        )
        return TransferStats(nbytes, ndesc, hs_ms, post_ms, xfer_ms, total, claim_ms, pushed)

    def _claim_and_read(
        self, req: Read, entry0: PeerEntry, plans: list[_Planned], deadline: float
    ) -> tuple[float, float, int, float]:
        """Claim (beside the READ) and READ from every source, then notify; returns the
        post and transfer ms, the descriptors and the claim's ms."""
        pending, rid = None, req.request_id
        if req.claim:
            pending = self._claims.submit(
                self._directory().claim, req.peer, entry0, rid, req.remote_block_ids,
                deadline, req.prompt_digest,
            )  # fmt: skip
        # the notification rides on the READ only when it is this rank's one READ, of
        # the prefill's rank 0, and nothing else has to be waited for first
        ride = req.notify and pending is None and len(plans) == 1 and plans[0][1] is entry0
        try:
            post_ms, xfer_ms, ndesc = self._execute_all(plans, rid, deadline, req.merge, ride)
        except TransferError:
            reads.settle(pending, deadline)  # its answer no longer matters
            raise
        claim_ms = reads.settle(pending, deadline)  # refused: the bytes read are discarded
        if req.notify and not ride:
            self._notify(req.peer, entry0, rid)
        return post_ms, xfer_ms, ndesc, claim_ms

    # --- receiving a push -------------------------------------------------------------

    def _pushable(self, plans: list[_Planned], entry0: PeerEntry, req: Read) -> bool:
        """Push when this decode pushes, the prefill says it does, and the request is one
        plain transfer: one source (the prefill's rank 0), claimed and notified here, and
        short enough for one frame."""
        if self._mailbox is None or not entry0.meta.push or not (req.claim and req.notify):
            return False
        if len(plans) != 1 or plans[0][1] is not entry0:
            return False
        plan = plans[0][2]
        return plan.regions == self._twins and plan.num_blocks <= protocol.MAX_PUSH_BLOCKS

    def _push_target(self) -> protocol.PushTarget:
        if self._target is None:
            agent, layout = self._reg.nixl(), self._reg.layout
            self._target = protocol.PushTarget(
                agent_name=agent.name,
                agent_metadata=agent.metadata(),
                region_addrs=list(agent.region_addrs),
                block_len=layout.block_len,
                num_blocks=layout.num_blocks,
                device_id=agent.device_id,
            )
        return self._target

    def _push(self, req: Read, entry: PeerEntry, deadline: float) -> tuple[float, float]:
        """Ask the prefill to WRITE the blocks into ours and wait for its notification;
        returns (ms until the WRITE was posted, ms from then until the bytes were here).
        The ask runs beside the wait: each poll drives this agent's UCX, which the
        prefill's WRITE (and its first connection's warm-up) needs while it runs."""
        assert self._mailbox is not None
        t0 = time.perf_counter()
        peer, rid = req.peer, req.request_id
        claim = PeerDirectory.claim_of(rid, req.remote_block_ids, deadline - t0, req.prompt_digest)
        push = protocol.Push(claim, self._push_target(), list(req.local_block_ids), req.merge)
        asked = self._claims.submit(self._posted_at, peer, entry, push, deadline)

        def refused() -> bool:
            return asked.done() and asked.exception() is not None

        # the prefill gives the WRITE up at the deadline (its clock started after ours):
        # past it and the margin, no byte of it can still arrive
        key = protocol.PUSH_NOTIF_PREFIX + rid.encode()
        arrived = self._mailbox.wait(key, deadline + PUSH_MARGIN_S, refused)
        t2 = time.perf_counter()
        t1 = reads.settle(asked, deadline)  # the ask's TransferError, if it failed
        if arrived:
            return (t1 - t0) * 1000, max(t2 - t1, 0.0) * 1000
        self._directory().forget(peer, entry, remove=True)
        raise TransferError(
            f"push of request {rid} from {peer} missed its deadline "
            f"({(t2 - t0) * 1000:.0f} ms); peer forgotten",
            "deadline",
        )

    def _posted_at(
        self, peer: PeerRef, entry: PeerEntry, req: protocol.Push, deadline: float
    ) -> float:
        """The push asked and its WRITE posted: when (perf_counter) the answer came."""
        self._directory().push(peer, entry, req, deadline)
        return time.perf_counter()

    # --- peers ------------------------------------------------------------------------

    def notify(
        self, peer: PeerRef, request_id: str, *, timeout_s: float = HANDSHAKE_TIMEOUT_S
    ) -> None:
        """Tell the prefill (its rank 0, where the blocks are held) that every rank has
        read ``request_id``'s blocks, so it frees them."""
        entry = self._peer(peer, time.perf_counter() + timeout_s)[0]
        try:
            self._notify(peer, entry, request_id)
        finally:
            self._directory().done(entry)

    def _sources(
        self, peer: PeerRef, entry0: PeerEntry, entries: list[PeerEntry], deadline: float
    ) -> tuple[list[_Source], float]:
        """(peer, entry, region pairs) of each prefill rank this rank reads from, and the
        handshakes' ms; each rank's entry is appended to ``entries`` (the caller releases
        them)."""
        reg = self._reg
        meta0, ms_total = entry0.meta, 0.0
        found: list[_Source] = []
        for src in ranks.sources(reg.rank, reg.config.tp_size, meta0.tp_size, reg.model_kv_heads):
            where, entry = peer, entry0
            if src.rank != 0:
                if len(meta0.rank_ports) != meta0.tp_size:
                    raise TransferError(
                        f"prefill {peer} runs {meta0.tp_size} ranks but names "
                        f"{len(meta0.rank_ports)} side-channel ports",
                        "incompatible",
                    )
                where = PeerRef(
                    _rank_host(meta0, src.rank) or peer.host,
                    meta0.rank_ports[src.rank],
                    meta0.engine_id,
                    meta0.incarnation,
                )
                entry, ms = self._peer(where, deadline)
                ms_total += ms
                entries.append(entry)
            self._check_rank(where, entry, meta0, src.rank)
            # a region per head: head to head; else the same heads on both sides (checked),
            # so every region reads its twin
            regions = src.regions if reg.layout.per_head_regions else self._twins
            found.append((where, entry, regions))
        return found, ms_total

    def _check_rank(
        self, where: PeerRef, entry: PeerEntry, meta0: protocol.PeerMetadata, rank: int
    ) -> None:
        reg, meta = self._reg, entry.meta
        expected = ranks.rank_heads(rank, meta0.tp_size, reg.model_kv_heads)
        problems = protocol.head_problems(reg.kv_heads, meta, expected, reg.layout.per_head_regions)
        if (meta.tp_rank, meta.tp_size) != (rank, meta0.tp_size):
            problems.append(f"rank {meta.tp_rank} of {meta.tp_size} answers for rank {rank}")
        if meta.incarnation != meta0.incarnation:
            problems.append(f"incarnation {meta.incarnation} != rank 0's {meta0.incarnation}")
        if problems:
            self._directory().forget(where, entry, remove=True)
            raise TransferError(
                f"peer {where} is incompatible: {'; '.join(problems)}", "incompatible"
            )

    def peer_info(
        self, peer: PeerRef, *, timeout_s: float = HANDSHAKE_TIMEOUT_S
    ) -> protocol.PeerMetadata:
        """The peer's handshake metadata (handshaking now if it is not cached)."""
        try:
            entry = self._peer(peer, time.perf_counter() + timeout_s)[0]
        except TransferError as e:
            self._reg.telemetry.record_failure(e.reason)
            raise
        self._directory().done(entry)
        return entry.meta

    # --- the READ ---------------------------------------------------------------------

    def _plan(
        self,
        entry: PeerEntry,
        regions: tuple[tuple[int, int], ...],
        remote_ids: list[int],
        local_ids: list[int],
        merge: bool,
    ) -> TransferPlan:
        layout = self._reg.layout
        try:
            return plan_read(
                regions=regions,
                block_len=layout.block_len,
                local_num_blocks=layout.num_blocks,
                remote_num_blocks=entry.remote.num_blocks,
                local_ids=local_ids,
                remote_ids=remote_ids,
                merge=merge,
            )
        except PlanError as e:
            raise TransferError(f"bad block ids for {entry.meta.engine_id}: {e}", "plan") from None

    def _execute_all(
        self, plans: list[_Planned], rid: str, deadline: float, merge: bool, ride: bool
    ) -> tuple[float, float, int]:
        """Post and wait for the READ from every source (in parallel when several; each
        ends by the deadline); the first failure is raised once all have ended."""
        if len(plans) == 1:
            peer, entry, plan = plans[0]
            return self._execute(peer, entry, plan, rid, deadline, merge, notify=ride)
        futures = [
            self._fanout.submit(self._execute, p, e, plan, rid, deadline, merge, notify=False)
            for p, e, plan in plans
        ]
        results, errors = [], []
        for f in futures:
            try:
                results.append(f.result())
            except TransferError as e:
                errors.append(e)
        if errors:
            raise errors[0]
        return (
            max(r[0] for r in results),
            max(r[1] for r in results),
            sum(r[2] for r in results),
        )

    def _execute(
        self,
        peer: PeerRef,
        entry: PeerEntry,
        plan: TransferPlan,
        rid: str,
        deadline: float,
        merge: bool,
        *,
        notify: bool = True,
    ) -> tuple[float, float, int]:
        """Post the READ (split across worker threads when large: :mod:`reads`), wait,
        release; with ``notify``, notify prefill (on the READ itself when it is one part, else
        once all are done)."""
        nixl = self._reg.nixl
        agent = nixl()
        notif = NOTIF_PREFIX + rid.encode() if notify else b""
        parts = reads.parts_of(plan, agent.threads, self._pool, self.post_mode)
        t0 = time.perf_counter()
        posting = reads.Posting(nixl, self.post_mode, entry, plan, notif, deadline, merge)
        results = reads.run_parts(posting, parts, self._pool)
        t2 = time.perf_counter()
        post_s = max(r[2] for r in results)
        states = {r[1] for r in results}
        if states == {"DONE"}:
            ndesc = sum(agent.descriptor_count(r[0], plan.descriptors) for r in results)
            for r in results:
                agent.release(r[0])
            if len(parts) > 1 and notify:
                self._notify(peer, entry, rid)
            return post_s * 1000, (t2 - t0 - post_s) * 1000, ndesc
        released = all([agent.release(r[0]) for r in results if r[0] is not None])
        self._directory().forget(peer, entry, remove=released)
        raise reads.read_error(peer, rid, results, (t2 - t0) * 1000)

    def _notify(self, peer: PeerRef, entry: PeerEntry, rid: str) -> None:
        try:
            self._reg.nixl().send_notif(entry.remote.name, NOTIF_PREFIX + rid.encode())
        except Exception as e:
            self._directory().forget(peer, entry, remove=True)
            raise TransferError(f"notifying {peer} for {rid} failed: {e}", "nixl_error") from None


def _rank_host(meta0: protocol.PeerMetadata, rank: int) -> str:
    """Where prefill rank ``rank`` listens when its engine named it ("": rank 0's host)."""
    hosts = meta0.rank_hosts
    return hosts[rank] if len(hosts) == meta0.tp_size else ""
