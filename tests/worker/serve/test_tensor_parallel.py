"""Tensor parallelism in the reference engine, with real rank processes, gloo and NIXL on
loopback: TP output equals TP 1 token for token; P/D between different TP sizes equals
aggregated TP 1, each decode rank reading exactly its KV heads from the prefill ranks that
hold them; prefill blocks are freed once, after the last reader; a prefill rank stopped
mid-request fails the request within its deadline with every block released, and a dead
rank stops its engine."""

from __future__ import annotations

import os
import random
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disagg_contract.presets import get_preset
from disagg_worker.model.model import BOS
from disagg_worker.model.rules.judge import kv_mismatches
from disagg_worker.transfer.rules.ranks import rank_heads
from tests.worker.serve.conftest import Workers, get, metric, post, wait_until

GEN = 6
LENGTHS = (1, 2, 16, 17, 33, 100, 255)  # block edges of 16-token blocks, and longer
PAIRS = [(1, 2), (2, 1), (2, 2), (4, 1), (1, 4)]
SPEC = get_preset("tiny")
# How a decode's answer says its READ ended by the request's deadline (decode's own clock):
# a handshake given what was left of it, or a READ past it.
DEADLINE_ENDED = re.compile(r"within (\d+(?:\.\d+)?) s|missed its deadline")


def _prompt(n: int, rng: random.Random) -> list[int]:
    return [BOS] + [rng.randrange(256) for _ in range(n - 1)]


def _bodies() -> list[dict[str, Any]]:
    rng = random.Random(23)
    digest = {"return_kv_digest": True}
    return [
        {"prompt": _prompt(n, rng), "max_tokens": GEN, "ignore_eos": True, **digest}
        for n in LENGTHS
    ]


def _tokens(url: str, body: dict[str, Any]) -> list[int]:
    status, out = post(url + "/v1/completions", body)
    assert status == 200, out
    return list(out["choices"][0]["token_ids"])


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    workers = Workers(tmp_path_factory.mktemp("tp"))
    try:
        yield workers
    finally:
        workers.stop()


@pytest.fixture(scope="module")
def aggregated(group: Workers) -> dict[str, Any]:
    """TP 1 aggregated answers: the reference every TP size must reproduce."""
    agg = group.worker("both", "agg-tp1")
    outs = [post(agg.url + "/v1/completions", b)[1] for b in _bodies()]
    return {
        "url": agg.url,
        "tokens": [o["choices"][0]["token_ids"] for o in outs],
        "kv": [o["disagg"]["kv_digest"] for o in outs],
    }


def _pd(prefill: Any, decode: Any, body: dict[str, Any]) -> dict[str, Any]:
    hop = {**body, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    status, first = post(prefill.url + "/v1/completions", hop)
    assert status == 200, first
    status, out = post(decode.url + "/v1/completions", {
        **body, "kv_transfer_params": first["kv_transfer_params"]})  # fmt: skip
    assert status == 200, out
    return out


def test_tp8_output_equals_tp1(group: Workers, aggregated: dict[str, Any]) -> None:
    """Aggregated TP 8: one query head per rank, each KV head on 4 ranks (TP 2 and 4 are
    proven by the P/D pairs below, whose prefill or decode runs at that size)."""
    agg = group.worker("both", "agg-tp8", tp_size=8)
    assert [_tokens(agg.url, b) for b in _bodies()] == aggregated["tokens"]
    group.stop_one(agg)


@pytest.mark.parametrize(("prefill_tp", "decode_tp"), PAIRS)
def test_pd_between_tp_sizes_equals_aggregated_tp1(
    group: Workers, aggregated: dict[str, Any], prefill_tp: int, decode_tp: int
) -> None:
    pre = group.spawn("prefill", f"pre-{prefill_tp}{decode_tp}", tp_size=prefill_tp)
    dec = group.spawn("decode", f"dec-{prefill_tp}{decode_tp}", tp_size=decode_tp)
    group.ready(pre, dec)
    try:
        per_block = 2 * SPEC.num_layers * 16 * SPEC.head_dim * 4  # one head's block
        for body, want, kv in zip(_bodies(), aggregated["tokens"], aggregated["kv"], strict=True):
            out = _pd(pre, dec, body)
            assert out["choices"][0]["token_ids"] == want, (len(body["prompt"]), prefill_tp)
            # the prompt KV decode's rank 0 holds (its heads) is the aggregated KV, bit for bit
            assert kv_mismatches(out["disagg"]["kv_digest"], kv) == []
            assert sorted(out["disagg"]["kv_digest"]) == [
                str(h) for h in rank_heads(0, decode_tp, 2)
            ]
            blocks = -(-len(body["prompt"]) // 16)
            # every decode rank read exactly its heads: all heads of every block, once per
            # decode rank holding them (replicas above 2 KV heads), one descriptor per head
            # and per source rank (a run of blocks is one descriptor)
            reads = sum(len(rank_heads(r, decode_tp, 2)) for r in range(decode_tp))
            assert out["disagg"]["transfer_bytes"] == reads * blocks * per_block
            assert out["disagg"]["transfer_descriptors"] == reads
            # the next prompt's blocks are one run only once this one's are free: the prefill
            # frees them when decode's notification comes, which a loaded host can delay
            wait_until(lambda: get(pre.url + "/debug/blocks")["used"] == 0, 20, "prefill release")
        assert get(dec.url + "/debug/blocks")["used"] == 0
        released = metric(
            get(pre.url + "/metrics"), 'disagg_kv_block_releases_total{reason="notified"}'
        )
        assert released == len(LENGTHS)  # one release per request, after the last reader
    finally:
        group.stop_one(pre)
        group.stop_one(dec)


def _rank_pids(parent: int) -> list[int]:
    """The rank processes rank 0 started (its children), by rank order of start."""
    kids = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(k) for k in kids]


def test_stopped_prefill_rank_fails_the_request_in_time_and_frees_every_block(
    group: Workers, aggregated: dict[str, Any]
) -> None:
    """Prefill TP 2 → decode TP 1: prefill rank 1 stopped after the prefill hop, so decode's
    READ of head 1 hangs: the request fails within the deadline (its answer says which wait
    the deadline ended), decode frees its blocks, the proxy-style release frees the
    prefill's; killing the rank stops the prefill pod."""
    pre = group.spawn("prefill", "pre-stop", tp_size=2, transfer_deadline_s=2, block_lease_s=20)
    dec = group.spawn("decode", "dec-stop", transfer_deadline_s=2, block_lease_s=20)
    group.ready(pre, dec)
    body = _bodies()[4]
    hop = {**body, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    status, first = post(pre.url + "/v1/completions", hop)
    assert status == 200, first
    (rank1,) = _rank_pids(pre.proc.pid)
    os.kill(rank1, signal.SIGSTOP)
    try:
        status, out = post(dec.url + "/v1/completions", {
            **body, "kv_transfer_params": first["kv_transfer_params"]})  # fmt: skip
        assert status in (502, 504), out
        ended = DEADLINE_ENDED.search(out["error"]["message"])
        assert ended, out  # not a fixed timeout, nor the server's hang guard (deadline + 10 s)
        assert ended.group(1) is None or float(ended.group(1)) <= 2, out
        assert get(dec.url + "/debug/blocks")["used"] == 0
        status, ans = post(
            pre.url + "/v1/kv/release", {"kv_transfer_params": first["kv_transfer_params"]}
        )
        assert (status, ans) == (200, {"released": True})
        assert get(pre.url + "/debug/blocks")["used"] == 0
    finally:
        os.kill(rank1, signal.SIGKILL)
    # a dead rank breaks the engine: rank 0 stops with an error instead of serving
    pre.proc.wait(timeout=15)
    assert pre.proc.returncode == 1
    assert "tensor-parallel rank 1 exited" in pre.log_tail()
    # and the next request to the decode fails at once, naming the prefill
    status, out = post(dec.url + "/v1/completions", {
        **body, "kv_transfer_params": first["kv_transfer_params"]})  # fmt: skip
    assert status == 502, out
    group.stop_one(dec)


def _two_free_ports() -> tuple[int, socket.socket]:
    """A free port P whose neighbour P + 1 is held open by the returned socket."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            base = probe.getsockname()[1]
        held = socket.socket()
        try:
            held.bind(("127.0.0.1", base + 1))
            held.listen()
            return base, held
        except OSError:
            held.close()
    raise AssertionError("no pair of ports")


def test_a_rank_that_cannot_start_fails_the_worker_at_once(group: Workers) -> None:
    """Rank 1's side channel (sideChannelPort + 1) is taken: the worker stops with an error
    naming the rank, seen by the start-up check before the group forms (not after the
    group's 60 s join timeout, whose error reads otherwise), and leaves no rank behind."""
    base, held = _two_free_ports()
    try:
        child = group.spawn("prefill", "pre-busy", tp_size=2, side_channel_port=base)
        child.proc.wait(timeout=120)  # a hang guard only
    finally:
        held.close()
    assert child.proc.returncode == 1
    log = child.log_tail()
    assert re.search(r"tensor-parallel rank 1 exited with code -?\d+; its log is above", log), log
    group.stop_one(child)
