"""Error policy of a READ, driven by a fake NIXL agent (the real one cannot be made to
return ERR on demand): every failure raises TransferError naming the cause and the peer,
releases the handle, forgets the peer, and counts the failure."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from disagg_worker import protocol
from disagg_worker.agent import RemotePeer
from disagg_worker.config import WorkerConfig
from disagg_worker.layout import KVLayout
from disagg_worker.peer_process import alloc
from disagg_worker.peers import PeerEntry, PeerRef, TransferError
from disagg_worker.transfer import KVTransferAgent

LAYOUT = KVLayout(num_layers=1, num_kv_heads=1, head_dim=8, block_size=4, num_blocks=8)
PEER = PeerRef("127.0.0.1", 1, "p0")


@dataclass
class FakeNixl:
    """Stands in for NixlAgent: posts return ``first``, polling returns ``final``."""

    first: str = "PROC"
    final: str = "ERR"
    post_raises: Exception | None = None
    threads: int = 0
    released: list[Any] = field(default_factory=list)

    def post_read(self, *args: Any, **kw: Any) -> tuple[Any, str]:
        if self.post_raises is not None:
            raise self.post_raises
        return object(), self.first

    def wait(self, handle: Any, state: str, deadline: float) -> str:
        if self.final == "PROC":  # never completes: the deadline ends it
            while time.perf_counter() < deadline:
                time.sleep(0.001)
        return self.final

    def release(self, handle: Any) -> bool:
        self.released.append(handle)
        return True

    def descriptor_count(self, handle: Any, default: int) -> int:
        return default


@dataclass
class FakeDirectory:
    forgotten: list[tuple[PeerRef, bool]] = field(default_factory=list)

    def get(self, peer: PeerRef, deadline: float) -> tuple[PeerEntry, float]:
        meta = protocol.PeerMetadata(
            "p0", "p0-x", b"", [1], LAYOUT.block_len, 0, protocol.LayoutInfo.of(LAYOUT),
            "DRAM", 1, 0, protocol.PROTOCOL_VERSION, "", b"",
        )  # fmt: skip
        return PeerEntry(meta, RemotePeer("p0-x", [1], LAYOUT.block_len, 8, 0, None)), 0.0

    def forget(self, peer: PeerRef, entry: PeerEntry, *, remove: bool) -> None:
        self.forgotten.append((peer, remove))


def agent_with(fake: FakeNixl) -> tuple[KVTransferAgent, FakeDirectory]:
    agent = KVTransferAgent(WorkerConfig(role="decode"), LAYOUT, alloc(LAYOUT))
    directory = FakeDirectory()
    agent._agent, agent._peers = fake, directory  # type: ignore[assignment]
    return agent, directory


@pytest.mark.parametrize(
    ("fake", "message", "reason"),
    [
        (FakeNixl(final="ERR"), "failed: NIXL state ERR; peer forgotten", "nixl_error"),
        (FakeNixl(first="ERR", final="ERR"), "NIXL state ERR", "nixl_error"),
        (FakeNixl(final="PROC"), "missed its deadline", "deadline"),
        (
            FakeNixl(post_raises=RuntimeError("NIXL_ERR_REMOTE_DISCONNECT")),
            "posting READ of request r1 from 127.0.0.1:1 \\(p0\\) failed: "
            "RuntimeError: NIXL_ERR_REMOTE_DISCONNECT",
            "nixl_error",
        ),
    ],
)
def test_fake_nixl_failures_release_forget_and_count(
    fake: FakeNixl, message: str, reason: str
) -> None:
    agent, directory = agent_with(fake)
    t0 = time.perf_counter()
    with pytest.raises(TransferError, match=message):
        agent.read(PEER, "r1", [0, 1], [2, 3], deadline_s=0.2)
    assert time.perf_counter() - t0 < 2.0
    assert directory.forgotten == [(PEER, True)]
    assert len(fake.released) == (0 if fake.post_raises else 1)
    assert agent.stats()[f"failures_{reason}"] == 1


def test_fake_nixl_done_releases_the_handle_and_counts_bytes() -> None:
    fake = FakeNixl(first="DONE", final="DONE")
    agent, directory = agent_with(fake)
    stats = agent.read(PEER, "r1", [0, 1, 5], [2, 3, 4])
    assert stats.bytes == 3 * LAYOUT.block_len and stats.descriptors == 2
    assert len(fake.released) == 1 and directory.forgotten == []
    assert agent.stats()["transfers"] == 1
