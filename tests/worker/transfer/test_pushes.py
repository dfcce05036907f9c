"""The prefill's side of a push, driven by a fake NIXL agent (the real one cannot be made
to hold a WRITE in flight, fail it or outlive its deadline on demand): which outcome frees
the blocks, and that a hold released while its WRITE runs is freed only after it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from disagg_worker.transfer.holder import BlockHolder
from disagg_worker.transfer.nixl_agent import RemotePeer
from disagg_worker.transfer.pushes import MAX_TARGETS, PushWriter
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.telemetry import TransferTelemetry

LAYOUT = KVLayout(num_layers=1, num_kv_heads=1, head_dim=8, block_size=4, num_blocks=8)


@dataclass
class FakeNixl:
    """Stands in for NixlAgent: every WRITE is in flight until ``states`` says otherwise."""

    states: dict[int, str] = field(default_factory=dict)  # handle → state
    released: list[int] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    posts: list[tuple[str, bytes]] = field(default_factory=list)

    def add_peer(self, metadata: bytes, addrs: list[int], *rest: int) -> RemotePeer:
        name = metadata.decode()
        self.loaded.append(name)
        return RemotePeer(name, addrs, rest[0], rest[1], rest[2], None)

    def remove_peer(self, peer: RemotePeer) -> None:
        self.removed.append(peer.name)

    def post_read(self, peer: RemotePeer, plan: Any, notif: bytes, **kw: Any) -> tuple[int, str]:
        assert kw["op"] == "WRITE"
        handle = len(self.posts)
        self.posts.append((peer.name, notif))
        self.states[handle] = "PROC"
        return handle, "PROC"

    def state(self, handle: int) -> str:
        return self.states[handle]

    def release(self, handle: int) -> bool:
        self.released.append(handle)
        return True


def push(
    rid: str, agent: str = "d0", deadline_s: float = 5.0, ids: tuple[int, ...] = (1, 2)
) -> protocol.Push:
    target = protocol.PushTarget(agent, agent.encode(), [4096], LAYOUT.block_len, 8, 0)
    claim = protocol.Claim(rid, list(ids), deadline_s, b"n")
    return protocol.Push(claim, target, [5 + i for i in range(len(ids))])


def setup() -> tuple[FakeNixl, BlockHolder, list[tuple[str, list[int], str]]]:
    nixl = FakeNixl()
    freed: list[tuple[str, list[int], str]] = []
    holder = BlockHolder(dict, TransferTelemetry(), lambda r, ids, why: freed.append((r, ids, why)))
    holder.writer = PushWriter(nixl, LAYOUT)  # type: ignore[arg-type]
    return nixl, holder, freed


def test_a_written_push_frees_its_blocks_and_releases_the_handle() -> None:
    nixl, holder, freed = setup()
    holder.hold("a", [1, 2], 30.0)
    answer = holder.push(push("a"))
    assert answer.posted and answer.answer.held and nixl.posts == [("d0", b"p:a")]
    holder._settle_pushes()
    assert freed == []  # still in flight
    nixl.states[0] = "DONE"
    holder._settle_pushes()
    assert freed == [("a", [1, 2], "pushed")] and nixl.released == [0]
    assert holder._telemetry.snapshot()["push_pushed"] == 1


def test_a_hold_released_during_its_write_is_freed_only_once_the_write_ends() -> None:
    nixl, holder, freed = setup()
    holder.hold("b", [1, 2], 30.0)
    holder.push(push("b"))
    assert holder.release("b")  # the decode hop failed while the WRITE runs
    assert freed == [] and len(holder.leases) == 1  # nothing freed under a live WRITE
    holder._settle_pushes()  # the next pass aborts it, then frees
    assert nixl.released == [0] and freed == [("b", [1, 2], "aborted")]


def test_a_failed_or_expired_write_keeps_the_blocks_held_for_decode_or_the_lease() -> None:
    nixl, holder, freed = setup()
    holder.hold("c", [1, 2], 30.0)
    holder.hold("d", [3, 4], 30.0)
    holder.push(push("c"))
    assert holder.push(push("d", agent="d1", deadline_s=0.0, ids=(3, 4))).posted
    nixl.states[0] = "ERR"
    time.sleep(0.001)  # the clock moves on past d's deadline of 0 s
    holder._settle_pushes()
    assert sorted(nixl.released) == [0, 1] and freed == []
    assert len(holder.leases) == 2  # freed when decode's failure releases them
    assert "d0" in nixl.removed  # a failed WRITE's target is loaded afresh next time
    snap = holder._telemetry.snapshot()
    assert (snap["push_failed"], snap["push_expired"]) == (1, 1)
    assert holder.release("c") and freed == [("c", [1, 2], "aborted")]


def test_a_push_that_is_not_held_posts_nothing() -> None:
    nixl, holder, _ = setup()
    answer = holder.push(push("never"))
    assert not answer.posted and answer.answer.reason == "unknown" and nixl.posts == []


def test_one_request_is_pushed_once_at_a_time_and_targets_are_kept_up_to_a_bound() -> None:
    nixl, holder, _ = setup()
    holder.hold("e", [1, 2], 30.0)
    assert holder.push(push("e")).posted
    again = holder.push(push("e"))
    assert not again.posted and "being pushed already" in again.error
    for i in range(MAX_TARGETS + 1):
        rid = f"t{i}"
        holder.hold(rid, [1, 2], 30.0)
        assert holder.push(push(rid, agent=f"x{i}")).posted
        nixl.states[len(nixl.posts) - 1] = "DONE"
        holder._settle_pushes()
    assert len(nixl.loaded) == MAX_TARGETS + 2  # d0 and every x: each loaded once
    # 66 targets for 64 places: the two least recently used idle ones went (d0, the
    # oldest, still has "e" in flight: kept)
    assert nixl.removed == ["x0", "x1"]
