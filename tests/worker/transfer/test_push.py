"""Push: the prefill WRITES a request's blocks into decode's on decode's claim. Two real
processes on 127.0.0.1 moving KV through NIXL/UCX (the prefill spawned, decode here);
every byte verified, as for READs in test_transfer.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import torch

from disagg_worker.config import WorkerConfig
from disagg_worker.transfer import handshake, protocol
from disagg_worker.transfer.engine import PUSH_MARGIN_S, KVTransferAgent, PeerRef, TransferError
from disagg_worker.transfer.layout import KVLayout
from disagg_worker.transfer.peer_process import PrefillProcess, alloc, spawn_prefill
from tests.worker.transfer.test_transfer import LAYOUT, assert_blocks, side_channel, wait_event

LEASE_S = 1.5


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "hmac"
    path.write_bytes(b"push me\n")
    return path


def _prefill(secret: Path | None, role: str = "prefill", **over: object) -> PrefillProcess:
    fields: dict[str, object] = {
        "role": role,
        "engine_id": "p0",
        "side_channel_port": 0,
        "block_lease_s": LEASE_S,
        "transfer_deadline_s": 1.0,
        **over,
    }
    if secret is not None:
        fields["hmac_secret_path"] = str(secret)
    return spawn_prefill(WorkerConfig.model_validate(fields), LAYOUT, seed=7)


@pytest.fixture(scope="module")
def prefill(secret: Path) -> Iterator[PrefillProcess]:
    proc = _prefill(secret)
    yield proc
    proc.stop()


def decode_config(secret: Path | None, **over: object) -> WorkerConfig:
    fields: dict[str, object] = {"role": "decode", "engine_id": "d0", "transfer_mode": "push"}
    if secret is not None:
        fields["hmac_secret_path"] = str(secret)
    return WorkerConfig.model_validate({**fields, **over})


@pytest.fixture()
def decode(secret: Path) -> Iterator[tuple[KVTransferAgent, list[torch.Tensor]]]:
    caches = alloc(LAYOUT)
    with KVTransferAgent(decode_config(secret), LAYOUT, caches) as agent:
        yield agent, caches


def peer_of(p: PrefillProcess) -> PeerRef:
    return PeerRef("127.0.0.1", p.port, "p0")


def test_a_push_is_byte_exact_and_frees_the_blocks_once_written(prefill, decode) -> None:
    agent, caches = decode
    remote, local = [3, 4, 5, 10, 20, 21], [0, 1, 2, 7, 30, 31]
    prefill.call("publish", "p1", remote)
    stats = agent.read(peer_of(prefill), "p1", remote, local)
    assert stats.pushed
    assert_blocks(caches, local, remote, seed=7)
    assert stats.bytes == 6 * LAYOUT.block_len * LAYOUT.num_regions
    assert stats.descriptors == 3 * LAYOUT.num_regions  # runs 0-2, 7, 30-31
    assert wait_event(prefill, "p1") == (remote, "pushed")
    assert agent.stats()["pushed"] == 1
    assert prefill.call("stats")["push_pushed"] == 1
    # decode never sent a READ: the prefill saw no READ notification for it
    assert prefill.call("stats").get("released_notified", 0) == 0


def test_concurrent_pushes_each_wait_for_their_own_notification(prefill, decode) -> None:
    agent, caches = decode
    jobs = {f"c{i}": ([i * 4, i * 4 + 1], [31 - i * 2, 30 - i * 2]) for i in range(6)}
    for rid, (remote, _) in jobs.items():
        prefill.call("publish", rid, remote)
    errors: list[BaseException] = []
    pushed: list[bool] = []

    def run(rid: str) -> None:
        try:
            pushed.append(agent.read(peer_of(prefill), rid, *jobs[rid]).pushed)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(rid,)) for rid in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors and pushed == [True] * len(jobs)
    assert_blocks(
        caches,
        [b for _, loc in jobs.values() for b in loc],
        [b for rem, _ in jobs.values() for b in rem],
        seed=7,
    )


def test_a_push_after_the_lease_ran_out_writes_nothing_and_says_why(prefill, decode) -> None:
    agent, caches = decode
    prefill.call("publish", "late", [14, 15])
    assert wait_event(prefill, "late") == ([14, 15], "lease_expired")
    with pytest.raises(TransferError, match="lease ran out") as err:
        agent.read(peer_of(prefill), "late", [14, 15], [0, 1], deadline_s=2.0)
    assert err.value.reason == "expired"
    assert_blocks(caches, [], [])  # nothing written: the WRITE was never posted
    prefill.call("publish", "on-time", [14, 15])
    assert agent.read(peer_of(prefill), "on-time", [14, 15], [0, 1]).pushed
    assert_blocks(caches, [0, 1], [14, 15], seed=7)


def test_a_push_for_another_prompt_is_refused(prefill, decode) -> None:
    agent, _ = decode
    digest = protocol.prompt_digest([1, 2, 3])
    prefill.call("publish", "other", [9], digest)
    with pytest.raises(TransferError, match="another prompt") as err:
        agent.read(peer_of(prefill), "other", [9], [9], prompt_digest=protocol.prompt_digest([4]))
    assert err.value.reason == "prompt_differs"


def test_a_prefill_that_does_not_push_is_read_from(secret, decode) -> None:
    agent, caches = decode
    both = _prefill(secret, role="both")  # one agent for both sides: it never pushes
    try:
        both.call("publish", "r", [5, 6])
        stats = agent.read(peer_of(both), "r", [5, 6], [8, 9])
        assert not stats.pushed
        assert_blocks(caches, [8, 9], [5, 6], seed=7)
        assert wait_event(both, "r") == ([5, 6], "notified")
    finally:
        both.stop()


def test_pushes_are_refused_without_the_secret_and_the_listener_keeps_serving(
    prefill, decode, secret
) -> None:
    agent, caches = decode
    prefill.call("publish", "stranger", [11])
    regions = [4096 * (i + 1) for i in range(LAYOUT.num_regions)]
    target = protocol.PushTarget("evil", b"x", regions, LAYOUT.block_len, 8, 0)
    push = protocol.Push(protocol.Claim("stranger", [11], 1.0, b"n"), target, [0])
    key = handshake.load_secret(str(secret))
    reply = side_channel(prefill, protocol.Codec(b"wrong").encode(push), key)
    assert isinstance(reply, protocol.Refusal) and "HMAC" in reply.reason
    # with the secret but a target that cannot load: the claim holds, nothing is written
    reply = side_channel(prefill, protocol.Codec(key).encode(push), key)
    assert isinstance(reply, protocol.PushAnswer) and reply.answer.held and not reply.posted
    assert "WRITE not posted" in reply.error
    # and a decode whose cache is cut otherwise is told what differs
    odd = protocol.Push(push.claim, msgspec.structs.replace(target, region_addrs=[4096]), [0])
    reply = side_channel(prefill, protocol.Codec(key).encode(odd), key)
    assert isinstance(reply, protocol.PushAnswer) and not reply.posted
    assert reply.error == f"decode registers 1 regions, this prefill {LAYOUT.num_regions}"
    assert agent.read(peer_of(prefill), "stranger", [11], [12]).pushed
    assert_blocks(caches, [12], [11], seed=7)


BIG = KVLayout(num_layers=8, num_kv_heads=8, head_dim=128, block_size=16, num_blocks=384)


def test_prefill_killed_mid_push_fails_by_the_deadline_and_margin(secret) -> None:
    victim = spawn_prefill(WorkerConfig(role="prefill", engine_id="v", side_channel_port=0), BIG)
    caches = alloc(BIG)
    deadline = 2.0
    outcome: dict[str, object] = {}
    try:
        cfg = decode_config(None, engine_id="d-k")
        with KVTransferAgent(cfg, BIG, caches) as agent:
            peer = PeerRef("127.0.0.1", victim.port)
            victim.call("publish", "warm", [0])
            assert agent.read(peer, "warm", [0], [0]).pushed
            ids = list(range(BIG.num_blocks))
            victim.call("publish", "big", ids)

            def run() -> None:
                t0 = time.monotonic()
                try:
                    outcome["stats"] = agent.read(peer, "big", ids, ids, deadline_s=deadline)
                except TransferError as e:
                    outcome["error"] = e
                outcome["elapsed"] = time.monotonic() - t0

            th = threading.Thread(target=run)
            th.start()
            victim.process.kill()
            th.join(deadline + PUSH_MARGIN_S + 5)
            assert not th.is_alive(), "push hung past its deadline"
            # the kill may come after the bytes: then the push succeeded, honestly
            if "error" in outcome:
                assert float(outcome["elapsed"]) < deadline + PUSH_MARGIN_S + 1.0  # type: ignore[arg-type]
            victim.process.join(5)
            t0 = time.monotonic()
            with pytest.raises(TransferError) as err:
                agent.read(peer, "again", [1], [1], deadline_s=1.0)
            # refused at connect once forgotten; a timed-out claim when the push had won
            assert err.value.reason in ("unreachable", "claim"), err.value
            assert time.monotonic() - t0 < 2.0
    finally:
        victim.stop()
