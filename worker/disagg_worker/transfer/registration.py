"""What both sides of a KV transfer share: this worker's caches, registered with NIXL.

Effectful layer (NIXL through :class:`NixlAgent`). :class:`Registration` checks the caches
against the layout, names this rank's KV heads, its NIXL agent and its engine's
incarnation, holds the codec and the telemetry both sides use, and on :meth:`register`
registers the buffer (a host staging copy of the caches when the memory type needs one)
with a new NIXL agent. The prefill side (:mod:`prefill`) and the decode side
(:mod:`decode`) work over one registration; :mod:`agent` starts and closes the three in
order.
"""

from __future__ import annotations

import threading
import uuid

import torch

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer import handshake
from disagg_worker.transfer.copy import alloc_staging, check_caches
from disagg_worker.transfer.nixl_agent import NixlAgent
from disagg_worker.transfer.nixl_compat import apply_ucx_env
from disagg_worker.transfer.peers import TransferError
from disagg_worker.transfer.rules import protocol, ranks
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.telemetry import TransferTelemetry


class Registration:
    """One worker's KV caches as NIXL sees them, and the identity both sides announce."""

    def __init__(
        self,
        config: WorkerConfig,
        layout: KVLayout,
        caches: list[torch.Tensor],
        *,
        model_kv_heads: int | None = None,
        incarnation: str | None = None,
    ) -> None:
        """``model_kv_heads``: the model's KV heads (default: the layout's, TP 1), of which
        this rank (``config.tp_rank`` of ``config.tp_size``) holds its share;
        ``incarnation``: shared by the engine's ranks (default: new)."""
        check_caches(config.device, layout, caches)
        self.config, self.layout = config, layout
        self.rank = config.tp_rank
        self.model_kv_heads = model_kv_heads or layout.num_kv_heads * config.tp_size
        self.kv_heads = ranks.rank_heads(self.rank, config.tp_size, self.model_kv_heads)
        if len(self.kv_heads) != layout.num_kv_heads:
            raise ValueError(
                f"layout holds {layout.num_kv_heads} KV heads; rank {self.rank} of "
                f"{config.tp_size} holds {len(self.kv_heads)} of {self.model_kv_heads}"
            )
        self.caches = list(caches)
        self.buffer: list[torch.Tensor] = self.caches  # what NIXL reads and writes
        self.telemetry = TransferTelemetry()
        self.codec = protocol.Codec(handshake.load_secret(config.hmac_secret_path))
        self.compat = protocol.compat_hash(layout, config.memory_type, self.model_kv_heads)
        self.incarnation = (
            incarnation or f"{config.engine_id or config.role}-{uuid.uuid4().hex[:8]}"
        )
        tp = config.tp_size
        self.agent_name = self.incarnation if tp == 1 else f"{self.incarnation}-r{self.rank}"
        self._agent: NixlAgent | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def staged(self) -> bool:
        """Whether NIXL moves a staging copy (on the host) rather than the caches."""
        return self.buffer is not self.caches

    @property
    def closed(self) -> bool:
        return self._closed

    def register(self) -> NixlAgent:
        """Stage (when the memory type needs it), set UCX's environment, create the NIXL
        agent and register the buffer with it; returns the agent."""
        cfg = self.config
        if cfg.needs_staging:
            self.buffer = alloc_staging(self.caches)
        apply_ucx_env(cfg.ucx_tls, cfg.ucx_env)
        self._agent = NixlAgent(
            self.agent_name, cfg.backends, cfg.memory_type, num_threads=cfg.nixl_threads
        )
        self._agent.register(self.buffer, self.layout.block_len, self.layout.num_blocks)
        return self._agent

    def nixl(self) -> NixlAgent:
        """The registered agent; TransferError ``closed`` before :meth:`register` or once
        closing has begun."""
        if self._agent is None or self._closed:
            raise TransferError("transfer agent is not running (start() it first)", "closed")
        return self._agent

    def begin_close(self) -> bool:
        """Mark the registration closed (every later use fails); False when it already was."""
        with self._lock:
            if self._closed:
                return False
            self._closed = True
            return True

    def close(self) -> None:
        """Transfer handles → dlists → remote agents → deregistration (the NIXL agent's)."""
        if self._agent is not None:
            self._agent.close()
