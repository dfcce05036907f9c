"""Prefill side of a KV transfer: publish the blocks, hold them, answer decode.

Effectful layer, composing the block holder (:mod:`holder`), a push's WRITE
(:mod:`pushes`), the side channel (:mod:`handshake`) and the wire contract
(:mod:`protocol`) over this worker's registration (:mod:`registration`).

:meth:`PrefillPublisher.publish` stages the blocks (device→host when the buffer is on the
host) and holds them (:mod:`holder`) until decode's notification arrives (attached to the
READ, so it is delivered only once the bytes have moved) or the lease expires. The side
channel answers decode's handshake with this rank's metadata, its claims from the holder
and, on a prefill that pushes, its pushes: the claim, then the WRITE into decode's blocks
(:mod:`pushes`). A rank other than 0 publishes nothing: its holder only drives NIXL's
progress (a READ of its regions needs it) and answers claims "unknown" (rank 0 holds the
blocks).
"""

from __future__ import annotations

from disagg_worker.transfer import handshake
from disagg_worker.transfer.copy import copy_blocks
from disagg_worker.transfer.holder import BlockHolder, ReleaseCallback
from disagg_worker.transfer.nixl_agent import NixlAgent
from disagg_worker.transfer.pushes import PushWriter
from disagg_worker.transfer.registration import Registration
from disagg_worker.transfer.rules import protocol


class PrefillPublisher:
    """The prefill side over one registration (see module docstring); started only on a
    prefill or both-role worker."""

    def __init__(self, registration: Registration, on_release: ReleaseCallback | None) -> None:
        self._reg = registration
        self._on_release = on_release
        self.rank_ports: list[int] = []  # every rank's side-channel port (rank 0 sets them)
        self.rank_hosts: list[str] = []  # and host, where ranks live in several pods
        self._holder: BlockHolder | None = None
        self._writer: PushWriter | None = None
        self._server: handshake.HandshakeServer | None = None

    # --- lifetime (driven by the agent) ----------------------------------------------

    def start(self, agent: NixlAgent) -> None:
        """On a prefill or both-role worker: the holder, the push writer (a prefill's), the
        side-channel listener."""
        cfg = self._reg.config
        if cfg.role not in ("prefill", "both"):
            return
        self._holder = BlockHolder(agent.notifications, self._reg.telemetry, self._on_release)
        if cfg.role == "prefill":  # "both" polls one agent for two kinds of notification
            self._writer = self._holder.writer = PushWriter(agent, self._reg.layout)
        self._server = handshake.HandshakeServer(
            cfg.side_channel_host, cfg.side_channel_port, self._on_frame
        )
        self._server.start()
        self._holder.start()

    def stop(self) -> None:
        """Before the NIXL agent closes: the notification thread, then the WRITEs' handles."""
        if self._holder is not None:
            self._holder.stop()
        if self._writer is not None:
            self._writer.close()

    def close(self) -> None:
        """After the NIXL agent: the side-channel listener."""
        if self._server is not None:
            self._server.close()

    @property
    def side_channel_port(self) -> int:
        if self._server is None:
            raise RuntimeError("no side channel: start() a prefill or both-role agent first")
        return self._server.port

    # --- publishing -------------------------------------------------------------------

    def publish(self, request_id: str, block_ids: list[int], prompt_digest: str = "") -> None:
        """Stage (if needed) and hold ``block_ids`` until notified or the lease expires;
        a claim naming another ``prompt_digest`` is refused."""
        reg = self._reg
        reg.nixl()
        if self._holder is None:
            raise RuntimeError(
                f"publish needs DISAGG_ROLE prefill or both (this worker is {reg.config.role})"
            )
        for b in block_ids:
            if not 0 <= b < reg.layout.num_blocks:
                raise ValueError(f"block id {b} out of range [0, {reg.layout.num_blocks})")
        if reg.staged:
            copy_blocks(reg.caches, reg.buffer, block_ids)
        self._holder.hold(request_id, block_ids, reg.config.block_lease_s, prompt_digest)

    def release(self, request_id: str) -> bool:
        """Free a published hold now (its decode failed); False when none is held."""
        if self._holder is None:
            return False
        return self._holder.release(request_id)

    # --- the side channel -------------------------------------------------------------

    def _on_frame(self, frame: bytes) -> bytes | None:
        """Side-channel handler: metadata or a claim's answer; Refused for anything else."""
        holder = self._holder
        assert holder is not None  # the listener runs only beside a holder
        push = holder.push if self._writer is not None else None
        reply, refused = protocol.answer(self._reg.codec, frame, self._metadata, holder.claim, push)
        if refused:
            self._reg.telemetry.refused.inc()
        return reply

    def _metadata(self, nonce: bytes) -> protocol.PeerMetadata:
        reg = self._reg
        agent, cfg = reg.nixl(), reg.config
        return protocol.PeerMetadata(
            engine_id=cfg.engine_id,
            agent_name=agent.name,
            incarnation=reg.incarnation,
            agent_metadata=agent.metadata(),
            region_addrs=list(agent.region_addrs),
            block_len=reg.layout.block_len,
            device_id=agent.device_id,
            layout=protocol.LayoutInfo.of(reg.layout),
            memory_type=cfg.memory_type,
            tp_size=cfg.tp_size,
            tp_rank=cfg.tp_rank,
            kv_heads=list(reg.kv_heads),
            model_kv_heads=reg.model_kv_heads,
            rank_ports=list(self.rank_ports)
            or ([self.side_channel_port] if cfg.tp_size == 1 else []),
            rank_hosts=list(self.rank_hosts),
            push=self._writer is not None and cfg.tp_size == 1,
            protocol_version=protocol.PROTOCOL_VERSION,
            compat_hash=reg.compat,
            nonce=nonce,
        )
