"""Two real processes on 127.0.0.1 moving KV blocks through NIXL/UCX, by decode's READ or
the prefill's push (a WRITE on decode's claim); every byte verified.

The prefill worker runs in a spawned child (:mod:`disagg_worker.transfer.peer_process`) with a cache
filled by a known pattern; the decode worker runs here.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer import handshake
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.decode import PUSH_MARGIN_S, Read
from disagg_worker.transfer.nixl_agent import AgentError
from disagg_worker.transfer.peer_process import PrefillProcess, alloc, pattern, spawn_prefill, words
from disagg_worker.transfer.peers import PeerRef, TransferError
from disagg_worker.transfer.rules import protocol
from disagg_worker.transfer.rules.layout import KVLayout

LAYOUT = KVLayout(
    num_layers=2, num_kv_heads=2, head_dim=16, block_size=4, num_blocks=32, block_major=False
)
SEED = 7
LEASE_S = 1.5


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "hmac"
    path.write_bytes(b"correct horse battery staple\n")
    return path


@pytest.fixture(scope="module")
def prefill(secret: Path) -> Iterator[PrefillProcess]:
    cfg = WorkerConfig(
        role="prefill",
        engine_id="p0",
        side_channel_port=0,
        block_lease_s=LEASE_S,
        transfer_deadline_s=1.0,  # the lease must outlast a read's deadline
        hmac_secret_path=str(secret),
    )
    proc = spawn_prefill(cfg, LAYOUT, seed=SEED)
    yield proc
    proc.stop()


def decode_config(secret: Path | None, **over: object) -> WorkerConfig:
    fields: dict[str, object] = {"role": "decode", "engine_id": "d0"}
    if secret is not None:
        fields["hmac_secret_path"] = str(secret)
    fields.update(over)
    return WorkerConfig.model_validate(fields)


@pytest.fixture(scope="module")
def decode(secret: Path) -> Iterator[tuple[KVTransferAgent, list[torch.Tensor]]]:
    caches = alloc(LAYOUT)
    with KVTransferAgent(decode_config(secret), LAYOUT, caches) as agent:
        yield agent, caches


@pytest.fixture()
def clean(decode):
    agent, caches = decode
    for t in caches:
        t.zero_()
    return agent, caches


def peer_of(p: PrefillProcess) -> PeerRef:
    return PeerRef("127.0.0.1", p.port, "p0")


def assert_blocks(caches, local_ids, remote_ids, layout=LAYOUT, seed=SEED) -> None:
    for r, t in enumerate(caches):
        w = words(t)
        for lb, rb in zip(local_ids, remote_ids, strict=True):
            assert torch.equal(w[lb], pattern(r, rb, layout.block_len, seed)), (r, lb, rb)
        untouched = [b for b in range(layout.num_blocks) if b not in set(local_ids)]
        assert not w[untouched].any(), "blocks outside the request were written"


def wait_event(p: PrefillProcess, rid: str, timeout: float = 10.0) -> tuple[list[int], str]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for erid, ids, reason in p.call("events"):
            if erid == rid:
                return ids, reason
        time.sleep(0.05)
    raise AssertionError(f"no release event for {rid} within {timeout} s")


def test_non_contiguous_partial_read_is_byte_exact_and_frees_on_notify(prefill, clean) -> None:
    agent, caches = clean
    remote, local = [3, 4, 5, 10, 20, 21], [0, 1, 2, 7, 30, 31]
    prefill.call("publish", "r1", remote)
    stats = agent.decode.read(Read(peer_of(prefill), "r1", remote, local))
    assert_blocks(caches, local, remote)
    assert stats.bytes == 6 * LAYOUT.block_len * LAYOUT.num_regions
    assert stats.descriptors == 3 * LAYOUT.num_regions  # runs 0-2, 7, 30-31
    assert wait_event(prefill, "r1") == (remote, "notified")


def test_per_block_mode_moves_the_same_bytes_with_more_descriptors(prefill, clean) -> None:
    agent, caches = clean
    ids = [8, 9, 10, 11]
    prefill.call("publish", "r2", ids)
    stats = agent.decode.read(Read(peer_of(prefill), "r2", ids, ids, merge=False))
    assert_blocks(caches, ids, ids)
    assert stats.descriptors == 4 * LAYOUT.num_regions
    assert stats.handshake_ms == 0.0  # peer cached by the first read
    wait_event(prefill, "r2")


def test_dynamic_post_mode_is_byte_exact(prefill, secret) -> None:
    caches = alloc(LAYOUT)
    cfg = decode_config(secret, engine_id="d-dyn")
    with KVTransferAgent(cfg, LAYOUT, caches, post_mode="dynamic") as agent:
        prefill.call("publish", "r3", [0, 1, 31])
        stats = agent.decode.read(Read(peer_of(prefill), "r3", [0, 1, 31], [5, 6, 9]))
        assert stats.handshake_ms > 0
    assert_blocks(caches, [5, 6, 9], [0, 1, 31])
    assert stats.descriptors == 2 * LAYOUT.num_regions


@pytest.mark.parametrize("mode", ["read", "push"])
def test_concurrent_transfers_from_threads(prefill, clean, secret, mode) -> None:
    """Pushes too: each waits for its own notification among the others'."""
    agent, caches = clean
    with contextlib.ExitStack() as stack:
        if mode == "push":
            caches = alloc(LAYOUT)
            cfg = decode_config(secret, engine_id="d-push", transfer_mode="push")
            agent = stack.enter_context(KVTransferAgent(cfg, LAYOUT, caches))
        jobs = {f"{mode}{i}": ([i * 4, i * 4 + 1], [31 - i * 2, 30 - i * 2]) for i in range(6)}
        for rid, (remote, _) in jobs.items():
            prefill.call("publish", rid, remote)
        errors: list[BaseException] = []
        pushed: list[bool] = []

        def run(rid: str) -> None:
            try:
                pushed.append(agent.decode.read(Read(peer_of(prefill), rid, *jobs[rid])).pushed)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=run, args=(rid,)) for rid in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        assert pushed == [mode == "push"] * len(jobs)
        assert_blocks(
            caches,
            [b for _, loc in jobs.values() for b in loc],
            [b for rem, _ in jobs.values() for b in rem],
        )


def test_unread_blocks_are_freed_when_the_lease_expires(prefill) -> None:
    prefill.call("publish", "lonely", [12, 13])
    t0 = time.monotonic()
    assert wait_event(prefill, "lonely") == ([12, 13], "lease_expired")
    assert time.monotonic() - t0 >= LEASE_S - 0.3


def test_layout_mismatch_is_refused_by_name(prefill, secret) -> None:
    other = LAYOUT.model_copy(update={"block_size": 8})
    with KVTransferAgent(decode_config(secret, engine_id="d-l"), other, alloc(other)) as agent:
        with pytest.raises(TransferError, match="incompatible: block_size 8 != 4"):
            agent.decode.read(Read(peer_of(prefill), "x", [0], [0]))
        assert agent.stats()["failures_incompatible"] == 1


def test_wrong_or_missing_secret_is_refused(prefill, tmp_path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_bytes(b"guess")
    for path, message in ((wrong, "HMAC mismatch"), (None, "no handshake secret")):
        cfg = decode_config(path, engine_id="d-h")
        with (
            KVTransferAgent(cfg, LAYOUT, alloc(LAYOUT)) as a,
            pytest.raises(TransferError, match=message),
        ):
            a.decode.read(Read(peer_of(prefill), "x", [0], [0]))


def side_channel(p: PrefillProcess, frame: bytes, key: bytes | None) -> protocol.Message:
    """One raw request/reply on the prefill's side channel, decoded with ``key``."""
    import zmq

    ctx = zmq.Context()
    try:
        raw = handshake.request(ctx, "127.0.0.1", p.port, frame, 5.0)
    finally:
        ctx.term()
    return protocol.Codec(key).decode(raw)


def test_other_protocol_version_is_refused(prefill, secret) -> None:
    key = handshake.load_secret(str(secret))
    v = protocol.PROTOCOL_VERSION
    frame = protocol.Codec(key, version=v + 1).encode(protocol.MetadataRequest("d", "", b"n"))
    assert side_channel(prefill, frame, key) == protocol.Refused(f"protocol_version {v} != {v + 1}")


def test_engine_id_mismatch_is_refused(prefill, clean) -> None:
    agent, _ = clean
    with pytest.raises(TransferError, match="engine_id someone-else != p0"):
        agent.decode.read(Read(PeerRef("127.0.0.1", prefill.port, "someone-else"), "x", [0], [0]))


def test_bad_block_ids_fail_the_request_only(prefill, clean) -> None:
    agent, _ = clean
    with pytest.raises(TransferError, match="remote block id 32 out of range"):
        agent.decode.read(Read(peer_of(prefill), "x", [32], [0]))


def test_backend_that_cannot_load_is_a_clear_error() -> None:
    cfg = WorkerConfig(role="decode", backends=["MOONCAKE"])
    agent = KVTransferAgent(cfg, LAYOUT, alloc(LAYOUT))
    with pytest.raises(AgentError, match=r"backend 'MOONCAKE' did not load .*UCX"):
        agent.start()
    agent.close()


BIG = KVLayout(num_layers=8, num_kv_heads=8, head_dim=128, block_size=16, num_blocks=384)


@pytest.mark.parametrize("mode", ["read", "push"])
def test_prefill_killed_mid_transfer_fails_within_deadline(prefill, clean, mode) -> None:
    """A push waits for its notification a margin past the deadline (the prefill gives
    its WRITE up at the deadline): no later byte can land once it has failed."""
    victim = spawn_prefill(WorkerConfig(role="prefill", engine_id="v", side_channel_port=0), BIG)
    caches = alloc(BIG)
    deadline = 3.0
    limit = deadline + 1.0 + (PUSH_MARGIN_S if mode == "push" else 0.0)
    outcome: dict[str, object] = {}
    try:
        cfg = decode_config(None, engine_id="d-k", transfer_mode=mode)
        with KVTransferAgent(cfg, BIG, caches) as agent:
            peer = PeerRef("127.0.0.1", victim.port)
            victim.call("publish", "warm", [0])
            # handshake + connection, then the real one
            assert agent.decode.read(Read(peer, "warm", [0], [0])).pushed == (mode == "push")
            ids = list(range(BIG.num_blocks))
            victim.call("publish", "big", ids)

            def run() -> None:
                t0 = time.monotonic()
                try:
                    outcome["stats"] = agent.decode.read(
                        Read(peer, "big", ids, ids, deadline_s=deadline)
                    )
                except TransferError as e:
                    outcome["error"] = e
                outcome["elapsed"] = time.monotonic() - t0

            th = threading.Thread(target=run)
            th.start()
            victim.process.kill()
            th.join(limit + 4)
            assert not th.is_alive(), "read hung past its deadline"
            assert isinstance(outcome.get("error"), TransferError), outcome
            assert float(outcome["elapsed"]) < limit  # type: ignore[arg-type]
            # the dead peer was forgotten: the next read re-handshakes and fails at once
            victim.process.join(5)  # its listening socket is gone once it has exited
            with pytest.raises(TransferError, match="unreachable: refused the connection"):
                agent.decode.read(Read(peer, "again", [1], [1], deadline_s=1.0))
    finally:
        victim.stop()
    # and the worker in this process is still healthy against a live peer
    agent2, caches2 = clean
    prefill.call("publish", "after", [2])
    agent2.decode.read(Read(peer_of(prefill), "after", [2], [3]))
    assert_blocks(caches2, [3], [2])


def test_probe_reports_a_working_path(prefill, secret, monkeypatch, capsys) -> None:
    from disagg_worker.transfer import probe

    monkeypatch.setenv("DISAGG_HMAC_SECRET_PATH", str(secret))
    argv = ["--peer", f"127.0.0.1:{prefill.port}", "--engine-id", "p0", "--json"]
    assert probe.main([*argv, "--expect-pattern", str(SEED)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["verified"] and report["engine_id"] == "p0"
    assert report["bytes"] == 4 * LAYOUT.block_len * LAYOUT.num_regions
    assert report["layout"]["block_size"] == LAYOUT.block_size


def test_probe_names_the_failing_step(prefill, monkeypatch, capsys) -> None:
    from disagg_worker.transfer import probe

    monkeypatch.delenv("DISAGG_HMAC_SECRET_PATH", raising=False)
    assert probe.main(["--peer", f"127.0.0.1:{prefill.port}", "--deadline-s", "2"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAILED at handshake") and "no handshake secret" in out


def test_reads_split_across_worker_threads_are_exact_and_notify_once(
    prefill, secret, monkeypatch
) -> None:
    from disagg_worker.transfer import reads

    monkeypatch.setattr(reads, "PARALLEL_MIN_BYTES", 0)  # split even this small read
    caches = alloc(LAYOUT)
    cfg = decode_config(secret, engine_id="d-mt", nixl_threads=2)
    remote, local = [1, 2, 3, 4, 9, 17], [20, 21, 22, 23, 2, 6]
    with KVTransferAgent(cfg, LAYOUT, caches) as agent:
        prefill.call("publish", "mt", remote)
        stats = agent.decode.read(Read(peer_of(prefill), "mt", remote, local))
    assert_blocks(caches, local, remote)
    # two halves of the region-major index list, each coalesced by NIXL on its own
    assert stats.descriptors >= 3 * LAYOUT.num_regions
    assert wait_event(prefill, "mt") == (remote, "notified")


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.binary(max_size=4096))
def test_hostile_frames_get_refusals_from_the_prefill_listener(prefill, secret, data) -> None:
    import zmq

    key = handshake.load_secret(str(secret))
    good = protocol.Codec(key).encode(protocol.MetadataRequest("d", "", b"n"))
    ctx = zmq.Context()
    try:
        for frame in (data, good[: len(good) // 2], good + b"\x00" + data):
            reply = handshake.request(ctx, "127.0.0.1", prefill.port, frame, 5.0)
            assert isinstance(protocol.Codec(key).decode(reply), protocol.Refused)
    finally:
        ctx.term()


def test_oversized_frame_is_dropped_and_the_prefill_keeps_serving(prefill, secret) -> None:
    import zmq

    key = handshake.load_secret(str(secret))
    good = protocol.Codec(key).encode(protocol.MetadataRequest("d", "", b"n"))
    ctx = zmq.Context()
    try:
        with pytest.raises(handshake.HandshakeTimeout):  # dropped at the transport
            handshake.request(ctx, "127.0.0.1", prefill.port, b"\x00" * (2 << 20), 0.5)
        reply = handshake.request(ctx, "127.0.0.1", prefill.port, good, 5.0)
        assert isinstance(protocol.Codec(key).decode(reply), protocol.PeerMetadata)
    finally:
        ctx.term()


def test_empty_block_list_moves_nothing_and_still_frees(prefill, clean) -> None:
    agent, caches = clean
    prefill.call("publish", "empty", [])
    stats = agent.decode.read(Read(peer_of(prefill), "empty", [], []))
    assert (stats.bytes, stats.descriptors) == (0, 0)
    assert_blocks(caches, [], [])
    assert wait_event(prefill, "empty") == ([], "notified")


# --- claims: decode asks prefill, before its READ, whether the blocks are still held ----


def test_read_after_the_lease_ran_out_reads_nothing_and_says_why(prefill, clean) -> None:
    agent, caches = clean
    prefill.call("publish", "late", [14, 15])
    assert wait_event(prefill, "late") == ([14, 15], "lease_expired")  # LEASE_S passed
    t0 = time.monotonic()
    with pytest.raises(TransferError) as err:
        agent.decode.read(Read(peer_of(prefill), "late", [14, 15], [0, 1], deadline_s=2.0))
    assert time.monotonic() - t0 < 2.0
    assert err.value.reason == "expired"
    message = str(err.value)
    assert f"request late from 127.0.0.1:{prefill.port} (p0): its KV is not used" in message
    assert "lease ran out" in message and "raise blockLeaseSeconds" in message
    # the claim is answered while the READ runs: bytes may have landed, and the caller
    # frees those blocks unused (an engine reads only positions its request wrote)
    assert agent.stats()["failures_expired"] >= 1
    # the prefill keeps serving: the next request is read and freed as usual
    prefill.call("publish", "on-time", [14, 15])
    agent.decode.read(Read(peer_of(prefill), "on-time", [14, 15], [0, 1]))
    assert_blocks(caches, [0, 1], [14, 15])
    assert wait_event(prefill, "on-time") == ([14, 15], "notified")


def test_reading_a_request_twice_is_refused_the_second_time(prefill, clean) -> None:
    agent, _ = clean
    prefill.call("publish", "twice", [16])
    agent.decode.read(Read(peer_of(prefill), "twice", [16], [16]))
    wait_event(prefill, "twice")
    with pytest.raises(TransferError, match="already released its blocks") as err:
        agent.decode.read(Read(peer_of(prefill), "twice", [16], [16]))
    assert err.value.reason == "not_held"
    with pytest.raises(TransferError, match="holds no such request"):
        agent.decode.read(Read(peer_of(prefill), "never-published", [16], [16]))


def test_a_claim_extends_the_lease_over_the_read(prefill, secret, clean) -> None:
    agent, caches = clean
    key = handshake.load_secret(str(secret))
    codec = protocol.Codec(key)
    prefill.call("publish", "slow", [24, 25])
    claim = protocol.Claim("slow", [24, 25], 3.0, b"n1")
    answer = side_channel(prefill, codec.encode(claim), key)
    assert isinstance(answer, protocol.ClaimAnswer) and answer.held, answer
    assert answer.expires_in_s >= 3.0  # was LEASE_S; now the claimed deadline plus a margin
    time.sleep(LEASE_S + 0.3)  # past the lease as published: still held
    assert all(rid != "slow" for rid, _, _ in prefill.call("events"))
    agent.decode.read(Read(peer_of(prefill), "slow", [24, 25], [3, 4]))
    assert_blocks(caches, [3, 4], [24, 25])
    assert wait_event(prefill, "slow") == ([24, 25], "notified")


def test_claims_with_a_wrong_hmac_or_for_strangers_do_not_disturb_the_listener(
    prefill, secret, tmp_path
) -> None:
    key = handshake.load_secret(str(secret))
    forged = protocol.Codec(b"guess").encode(protocol.Claim("x", [1], 600.0, b"n"))
    assert side_channel(prefill, forged, key) == protocol.Refused(
        "HMAC mismatch: the peer uses a different handshake secret"
    )
    unsigned = protocol.Codec(None).encode(protocol.Claim("x", [1], 600.0, b"n"))
    assert isinstance(side_channel(prefill, unsigned, key), protocol.Refused)
    stranger = protocol.Codec(key).encode(protocol.Claim("nobody", [1], 1.0, b"n2"))
    assert side_channel(prefill, stranger, key) == protocol.ClaimAnswer(
        "nobody", False, "unknown", 0.0, [], b"n2"
    )
    # a decode worker with the wrong secret never gets as far as a claim or a READ
    wrong = tmp_path / "wrong"
    wrong.write_bytes(b"guess")
    with (
        KVTransferAgent(decode_config(wrong, engine_id="d-w"), LAYOUT, alloc(LAYOUT)) as a,
        pytest.raises(TransferError, match="HMAC mismatch"),
    ):
        a.decode.read(Read(peer_of(prefill), "x", [0], [0]))
    assert prefill.call("stats")["handshake_refused"] >= 3


# --- push: the prefill WRITEs the blocks into decode's on decode's claim -----------------


@pytest.fixture()
def pushing(secret: Path) -> Iterator[tuple[KVTransferAgent, list[torch.Tensor]]]:
    caches = alloc(LAYOUT)
    cfg = decode_config(secret, engine_id="d-pushing", transfer_mode="push")
    with KVTransferAgent(cfg, LAYOUT, caches) as agent:
        yield agent, caches


def test_a_push_is_byte_exact_and_frees_the_blocks_once_written(prefill, pushing) -> None:
    agent, caches = pushing
    remote, local = [3, 4, 5, 10, 20, 21], [0, 1, 2, 7, 30, 31]
    before = prefill.call("stats")
    prefill.call("publish", "push-p1", remote)
    stats = agent.decode.read(Read(peer_of(prefill), "push-p1", remote, local))
    assert stats.pushed
    assert_blocks(caches, local, remote, seed=7)
    assert stats.bytes == 6 * LAYOUT.block_len * LAYOUT.num_regions
    assert stats.descriptors == 3 * LAYOUT.num_regions  # runs 0-2, 7, 30-31
    assert wait_event(prefill, "push-p1") == (remote, "pushed")
    assert agent.stats()["pushed"] == 1
    after = prefill.call("stats")
    assert after["push_pushed"] - before.get("push_pushed", 0) == 1
    # decode sent no READ notification: the prefill freed the blocks on its WRITE alone
    assert after.get("released_notified") == before.get("released_notified")


def test_a_push_after_the_lease_ran_out_writes_nothing_and_says_why(prefill, pushing) -> None:
    agent, caches = pushing
    prefill.call("publish", "push-late", [14, 15])
    assert wait_event(prefill, "push-late") == ([14, 15], "lease_expired")
    with pytest.raises(TransferError, match="lease ran out") as err:
        agent.decode.read(Read(peer_of(prefill), "push-late", [14, 15], [0, 1], deadline_s=2.0))
    assert err.value.reason == "expired"
    assert_blocks(caches, [], [])  # nothing written: the WRITE was never posted
    prefill.call("publish", "push-on-time", [14, 15])
    assert agent.decode.read(Read(peer_of(prefill), "push-on-time", [14, 15], [0, 1])).pushed
    assert_blocks(caches, [0, 1], [14, 15], seed=7)


def test_a_push_for_another_prompt_is_refused(prefill, pushing) -> None:
    agent, _ = pushing
    digest = protocol.prompt_digest([1, 2, 3])
    prefill.call("publish", "push-other", [9], digest)
    with pytest.raises(TransferError, match="another prompt") as err:
        agent.decode.read(
            Read(
                peer_of(prefill), "push-other", [9], [9], prompt_digest=protocol.prompt_digest([4])
            )
        )
    assert err.value.reason == "prompt_differs"


def test_a_prefill_that_does_not_push_is_read_from(secret, pushing) -> None:
    agent, caches = pushing
    # one agent for both sides: it never pushes
    cfg = WorkerConfig(role="both", engine_id="p0", side_channel_port=0, block_lease_s=LEASE_S,
                       transfer_deadline_s=1.0, hmac_secret_path=str(secret))  # fmt: skip
    both = spawn_prefill(cfg, LAYOUT, seed=7)
    try:
        both.call("publish", "push-r", [5, 6])
        stats = agent.decode.read(Read(peer_of(both), "push-r", [5, 6], [8, 9]))
        assert not stats.pushed
        assert_blocks(caches, [8, 9], [5, 6], seed=7)
        assert wait_event(both, "push-r") == ([5, 6], "notified")
    finally:
        both.stop()


def test_pushes_are_refused_without_the_secret_and_the_listener_keeps_serving(
    prefill, pushing, secret
) -> None:
    agent, caches = pushing
    prefill.call("publish", "push-stranger", [11])
    regions = [4096 * (i + 1) for i in range(LAYOUT.num_regions)]
    target = protocol.PushTarget("evil", b"x", regions, LAYOUT.block_len, 8, 0)
    push = protocol.Push(protocol.Claim("push-stranger", [11], 1.0, b"n"), target, [0])
    key = handshake.load_secret(str(secret))
    reply = side_channel(prefill, protocol.Codec(b"wrong").encode(push), key)
    assert isinstance(reply, protocol.Refused) and "HMAC" in reply.reason
    # with the secret but a target that cannot load: the claim holds, nothing is written
    reply = side_channel(prefill, protocol.Codec(key).encode(push), key)
    assert isinstance(reply, protocol.PushAnswer) and reply.answer.held and not reply.posted
    assert "WRITE not posted" in reply.error
    # and a decode whose cache is cut otherwise is told what differs
    odd = protocol.Push(push.claim, msgspec.structs.replace(target, region_addrs=[4096]), [0])
    reply = side_channel(prefill, protocol.Codec(key).encode(odd), key)
    assert isinstance(reply, protocol.PushAnswer) and not reply.posted
    assert reply.error == f"decode registers 1 regions, this prefill {LAYOUT.num_regions}"
    assert agent.decode.read(Read(peer_of(prefill), "push-stranger", [11], [12])).pushed
    assert_blocks(caches, [12], [11], seed=7)
