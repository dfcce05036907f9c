"""The agent's lifetime over its registration and two sides: teardown in one order (threads,
then NIXL's handles and registration, then sockets), once, also when start fails."""

from __future__ import annotations

import pytest

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.decode import Read
from disagg_worker.transfer.peer_process import alloc
from disagg_worker.transfer.peers import PeerRef, TransferError
from disagg_worker.transfer.rules.layout import KVLayout

LAYOUT = KVLayout(num_layers=1, num_kv_heads=1, head_dim=8, block_size=4, num_blocks=8)


def recording(agent: KVTransferAgent, calls: list[str]) -> None:
    """Record the teardown steps instead of running them."""
    for name, part in (("prefill", agent.prefill), ("decode", agent.decode)):
        for step in ("stop", "close"):
            setattr(part, step, lambda n=f"{name}.{step}": calls.append(n))
    agent.registration.close = lambda: calls.append("registration.close")  # type: ignore[method-assign]


def test_close_stops_threads_then_nixl_then_sockets_once() -> None:
    agent = KVTransferAgent(WorkerConfig(role="decode"), LAYOUT, alloc(LAYOUT))
    calls: list[str] = []
    recording(agent, calls)
    agent.close()
    agent.close()
    assert calls == [
        "prefill.stop",
        "decode.stop",
        "registration.close",
        "prefill.close",
        "decode.close",
    ]
    with pytest.raises(TransferError, match="not running") as err:
        agent.decode.read(Read(PeerRef("127.0.0.1", 1, "p0"), "r", [0], [0]))
    assert err.value.reason == "closed"


def test_a_failed_start_tears_down_what_it_started() -> None:
    agent = KVTransferAgent(WorkerConfig(role="decode"), LAYOUT, alloc(LAYOUT))
    calls: list[str] = []
    recording(agent, calls)

    def fail() -> None:
        raise RuntimeError("no backend")

    agent.registration.register = fail  # type: ignore[assignment,method-assign]
    with pytest.raises(RuntimeError, match="no backend"):
        agent.start()
    assert calls[0] == "prefill.stop" and calls[-1] == "decode.close" and len(calls) == 5
