"""Error policy of a READ, driven by a fake NIXL agent (the real one cannot be made to
return ERR on demand): every failure raises TransferError naming the cause and the peer,
releases the handle, forgets the peer, and counts the failure."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.decode import Read
from disagg_worker.transfer.nixl_agent import RemotePeer
from disagg_worker.transfer.peer_process import alloc
from disagg_worker.transfer.peers import (
    BACKOFF_FIRST_S,
    BACKOFF_MAX_S,
    PeerDirectory,
    PeerEntry,
    PeerRef,
    TransferError,
    backoff_delay,
    claim_refused,
)
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout

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
    posted: int = 0
    notified: list[tuple[str, bytes]] = field(default_factory=list)

    def send_notif(self, peer_name: str, msg: bytes) -> None:
        self.notified.append((peer_name, msg))

    def post_read(self, *args: Any, **kw: Any) -> tuple[Any, str]:
        self.posted += 1
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
    claims: list[tuple[str, list[int]]] = field(default_factory=list)
    answer: protocol.ClaimAnswer | None = None  # a "not held" answer to every claim
    finished: int = 0  # requests that said they are done with their entry

    def claim(
        self,
        peer: PeerRef,
        entry: PeerEntry,
        rid: str,
        ids: list[int],
        deadline: float,
        digest: str = "",
    ) -> float:
        self.claims.append((rid, ids))
        if self.answer is not None:
            raise claim_refused(peer, self.answer, ids)
        return 0.1

    def get(self, peer: PeerRef, deadline: float) -> tuple[PeerEntry, float]:
        meta = protocol.PeerMetadata(
            "p0", "p0-x", "p0-x", b"", [1], LAYOUT.block_len, 0,
            protocol.LayoutInfo.of(LAYOUT), "DRAM", 1, 0, [0], 1, [1],
            protocol.PROTOCOL_VERSION, "", b"",
        )  # fmt: skip
        return PeerEntry(meta, RemotePeer("p0-x", [1], LAYOUT.block_len, 8, 0, None)), 0.0

    def forget(self, peer: PeerRef, entry: PeerEntry, *, remove: bool) -> None:
        self.forgotten.append((peer, remove))

    def done(self, entry: PeerEntry) -> None:
        self.finished += 1


def agent_with(fake: FakeNixl) -> tuple[KVTransferAgent, FakeDirectory]:
    agent = KVTransferAgent(WorkerConfig(role="decode"), LAYOUT, alloc(LAYOUT))
    directory = FakeDirectory()
    agent.registration._agent = fake  # type: ignore[assignment]
    agent.decode._peers = directory  # type: ignore[assignment]
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
        agent.decode.read(Read(PEER, "r1", [0, 1], [2, 3], deadline_s=0.2))
    assert time.perf_counter() - t0 < 2.0
    assert directory.forgotten == [(PEER, True)]
    assert directory.finished == 1  # the entry is handed back on the failure path too
    assert len(fake.released) == (0 if fake.post_raises else 1)
    assert agent.stats()[f"failures_{reason}"] == 1


def test_fake_nixl_done_releases_the_handle_and_counts_bytes() -> None:
    fake = FakeNixl(first="DONE", final="DONE")
    agent, directory = agent_with(fake)
    stats = agent.decode.read(Read(PEER, "r1", [0, 1, 5], [2, 3, 4]))
    assert stats.bytes == 3 * LAYOUT.block_len and stats.descriptors == 2
    assert len(fake.released) == 1 and directory.forgotten == []
    assert agent.stats()["transfers"] == 1
    assert directory.claims == [("r1", [0, 1, 5])]
    assert fake.notified == [("p0-x", b"r:r1")]  # prefill frees them once the claim held


def test_reads_claim_the_remote_blocks_first() -> None:
    agent, directory = agent_with(FakeNixl(first="DONE", final="DONE"))
    stats = agent.decode.read(Read(PEER, "r1", [0, 1, 5], [2, 3, 4]))
    assert directory.claims == [("r1", [0, 1, 5])] and stats.claim_ms == 0.1
    agent.decode.read(Read(PEER, "probe", [0], [0], claim=False))
    assert len(directory.claims) == 1


@pytest.mark.parametrize(
    ("answer", "message", "reason"),
    [
        (
            protocol.ClaimAnswer("r1", False, "expired", -0.25, [], b""),
            r"request r1 from 127.0.0.1:1 \(p0\): its KV is not used \(bytes read are dropped\), "
            r"the prefill.s lease ran "
            r"out 0.25 s before decode arrived .* raise blockLeaseSeconds",
            "expired",
        ),
        (
            protocol.ClaimAnswer("r1", False, "unknown", 0.0, [], b""),
            "the prefill holds no such request",
            "not_held",
        ),
        (
            protocol.ClaimAnswer("r1", False, "blocks_differ", 3.0, [6, 7], b""),
            r"holds blocks \[6, 7\] for it, not \[0, 1\]",
            "not_held",
        ),
        (
            protocol.ClaimAnswer("r1", False, "released", 0.0, [], b""),
            "already released its blocks",
            "not_held",
        ),
    ],
)
def test_a_refused_claim_uses_nothing_read_and_counts_the_failure(
    answer: protocol.ClaimAnswer, message: str, reason: str
) -> None:
    """The claim runs beside the READ: the READ is posted and its handle released, but a
    refused claim fails the request, sends prefill no notification and counts no transfer."""
    fake = FakeNixl(first="DONE", final="DONE")
    agent, directory = agent_with(fake)
    directory.answer = answer
    with pytest.raises(TransferError, match=message) as err:
        agent.decode.read(Read(PEER, "r1", [0, 1], [2, 3]))
    assert err.value.reason == reason
    assert fake.posted == 1 and len(fake.released) == 1 and fake.notified == []
    assert directory.forgotten == []
    assert agent.stats()[f"failures_{reason}"] == 1 and agent.stats()["transfers"] == 0


def test_a_failing_peer_is_backed_off_longer_each_time_up_to_a_cap() -> None:
    delays = [backoff_delay(n) for n in range(1, 9)]
    assert delays[:4] == [BACKOFF_FIRST_S, 2 * BACKOFF_FIRST_S, 4 * BACKOFF_FIRST_S, 8.0]
    assert delays == sorted(delays) and max(delays) == BACKOFF_MAX_S
    assert backoff_delay(10_000) == BACKOFF_MAX_S  # no overflow in a long outage


def test_an_ask_past_its_deadline_is_not_sent() -> None:
    """Claims and pushes: a deadline already passed fails at once, naming the ask, and
    nothing goes out on the side channel (the peer is unreachable: a send would hang)."""
    directory = PeerDirectory(
        None,  # type: ignore[arg-type]
        protocol.Codec(),
        layout=LAYOUT,
        memory_type="DRAM",
        model_kv_heads=1,
        engine_id="d0",
    )
    entry = FakeDirectory().get(PEER, 0.0)[0]
    past = time.perf_counter() - 1.0
    try:
        with pytest.raises(TransferError, match="deadline passed before the claim") as err:
            directory.claim(PEER, entry, "r1", [1], past)
        assert err.value.reason == "deadline"
        claim = PeerDirectory.claim_of("r2", [1], 1.0, "")
        target = protocol.PushTarget("d0", b"m", [4096], LAYOUT.block_len, 8, 0)
        push = protocol.Push(claim, target, [2])
        with pytest.raises(TransferError, match="deadline passed before the push") as err:
            directory.push(PEER, entry, push, past)
        assert err.value.reason == "deadline"
        assert directory._channels == {}  # no socket was opened for either
    finally:
        directory.close()
