"""One worker's KV transfer agent: its registration and the two sides over it.

Effectful layer. :class:`KVTransferAgent` builds the registration (:mod:`registration`:
the caches registered with NIXL), the prefill side (:mod:`prefill`: publish, hold, answer
claims and pushes) and the decode side (:mod:`decode`: READ, or receive a push), and owns
their lifetime: :meth:`~KVTransferAgent.start` brings them up in that order (a side starts
only what its worker's role needs) and, on any failure, tears down what was started;
:meth:`~KVTransferAgent.close` releases NIXL's handles on every path in one order. Callers
use the side they need: ``agent.prefill.publish(...)``, ``agent.decode.read(...)``.
"""

from __future__ import annotations

import torch

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.decode import DEFAULT_POST_MODE, DecodeReader
from disagg_worker.transfer.holder import ReleaseCallback
from disagg_worker.transfer.nixl_agent import PostMode
from disagg_worker.transfer.prefill import PrefillPublisher
from disagg_worker.transfer.registration import Registration
from disagg_worker.transfer.rules.layout import KVLayout

__all__ = ["KVTransferAgent"]


class KVTransferAgent:
    """One worker's NIXL KV transfer agent (see module docstring)."""

    def __init__(
        self,
        config: WorkerConfig,
        layout: KVLayout,
        caches: list[torch.Tensor],
        *,
        model_kv_heads: int | None = None,
        incarnation: str | None = None,
        on_release: ReleaseCallback | None = None,
        post_mode: PostMode = DEFAULT_POST_MODE,
    ) -> None:
        """``config`` to ``incarnation``: the :class:`Registration` both sides share;
        ``on_release``: the prefill side's callback when a hold ends; ``post_mode``: how
        the decode side posts its READs."""
        self.registration = Registration(
            config, layout, caches, model_kv_heads=model_kv_heads, incarnation=incarnation
        )
        self.prefill = PrefillPublisher(self.registration, on_release)
        self.decode = DecodeReader(self.registration, post_mode)

    def start(self) -> None:
        """Bring everything up; on any failure, tear down what was started and re-raise."""
        try:
            agent = self.registration.register()
            self.decode.start(agent)
            self.prefill.start(agent)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Threads → transfer handles → dlists → remote agents → deregistration → sockets."""
        if not self.registration.begin_close():
            return
        self.prefill.stop()  # its notification thread, then its WRITEs' handles
        self.decode.stop()  # its READ, claim and fan-out threads
        self.registration.close()  # the NIXL agent
        self.prefill.close()  # the side-channel listener
        self.decode.close()  # the side-channel clients

    def __enter__(self) -> KVTransferAgent:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def stats(self) -> dict[str, float]:
        return self.registration.telemetry.snapshot()

    def metrics_text(self) -> bytes:
        return self.registration.telemetry.metrics_text()
