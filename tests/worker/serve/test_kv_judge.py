"""The KV judge with real workers: a P/D decode's received prompt KV is bit-identical to the
KV an aggregated worker computes, block by block and head by head; one byte changed in a
held prefill block before decode reads it is caught, at that head and block only."""

from __future__ import annotations

import ctypes
import random
from collections.abc import Iterator
from typing import Any

import pytest

from disagg_contract.config import WorkerConfig
from disagg_worker.model.model import BOS
from disagg_worker.model.rules.judge import kv_mismatches
from disagg_worker.transfer.probe import peer_meta
from tests.worker.serve.conftest import Workers, get, metric, post


class _IOVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _flip_byte(pid: int, address: int) -> None:
    """XOR one byte of another process's memory (process_vm_readv / _writev, as CMA reads)."""
    libc = ctypes.CDLL(None, use_errno=True)
    buf = (ctypes.c_ubyte * 1)()
    local, remote = _IOVec(ctypes.addressof(buf), 1), _IOVec(address, 1)
    assert libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 1
    buf[0] ^= 0x5A
    assert libc.process_vm_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == 1


@pytest.fixture(scope="module")
def trio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    workers = Workers(tmp_path_factory.mktemp("judge"))
    try:
        children = [workers.spawn(role) for role in ("both", "prefill", "decode")]
        workers.ready(*children)
        yield dict(zip(("agg", "prefill", "decode"), children, strict=True))
    finally:
        workers.stop()


def _body(n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    prompt = [BOS] + [rng.randrange(256) for _ in range(n - 1)]
    return {"prompt": prompt, "max_tokens": 4, "ignore_eos": True, "return_kv_digest": True}


def _prefill_hop(trio: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    hop = {**body, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    status, first = post(trio["prefill"].url + "/v1/completions", hop)
    assert status == 200, first
    return first


def _decode_hop(trio: dict[str, Any], body: dict[str, Any], params: dict[str, Any]) -> Any:
    status, out = post(
        trio["decode"].url + "/v1/completions", {**body, "kv_transfer_params": params}
    )
    assert status == 200, out
    return out["disagg"]["kv_digest"]


def _aggregated(trio: dict[str, Any], body: dict[str, Any]) -> Any:
    status, out = post(trio["agg"].url + "/v1/completions", body)
    assert status == 200, out
    return out["disagg"]["kv_digest"]


@pytest.mark.parametrize("n", [1, 16, 17, 100])
def test_decode_holds_the_prompt_kv_aggregated_computes(trio: dict[str, Any], n: int) -> None:
    body = _body(n, n)
    want = _aggregated(trio, body)
    assert sorted(want) == ["0", "1"] and len(want["0"]) == -(-n // 16)
    params = _prefill_hop(trio, body)["kv_transfer_params"]
    assert kv_mismatches(_decode_hop(trio, body, params), want) == []


def test_one_corrupted_byte_in_a_transferred_block_is_caught(trio: dict[str, Any]) -> None:
    body = _body(50, 7)  # 4 blocks
    want = _aggregated(trio, body)
    params = _prefill_hop(trio, body)["kv_transfer_params"]
    # head 1's region of the prefill, third block of the prompt, somewhere inside layer 2
    meta = peer_meta(WorkerConfig(role="decode"), "127.0.0.1", params["remote_port"], 5.0)
    block = params["remote_block_ids"][2]
    address = meta.region_addrs[1] + block * meta.block_len + meta.block_len // 2 + 12
    _flip_byte(trio["prefill"].proc.pid, address)
    got = _decode_hop(trio, body, params)
    assert kv_mismatches(got, want) == [(1, 2)]


def test_the_judge_compares_only_heads_both_sides_hold() -> None:
    assert kv_mismatches({"0": ["a", "b"]}, {"0": ["a", "c"], "1": ["x", "y"]}) == [(0, 1)]
    assert kv_mismatches({"1": ["a"]}, {"1": ["a", "b"]}) == [(1, 0), (1, 1)]
    with pytest.raises(ValueError, match="no KV head in common"):
        kv_mismatches({"0": []}, {"1": []})


def test_a_decode_that_computes_a_prompt_nobody_asked_it_to_counts_the_fallback(
    trio: dict[str, Any],
) -> None:
    """A client that drops kv_transfer_params gets correct tokens from the decode, which
    computed the prompt itself: counted by reason, and the answer says so; an explicit
    do_remote_prefill: false (a decode-only request on purpose) and a real P/D hop are not
    counted."""
    name = 'disagg_decode_recomputed_total{reason="no_kv_transfer_params"}'
    url = trio["decode"].url

    def count() -> float:
        return metric(get(url + "/metrics"), name)

    before, body = count(), _body(20, 3)
    status, out = post(url + "/v1/completions", body)
    assert status == 200 and out["disagg"]["kv_source"] == "computed"
    assert count() == before + 1
    local = {**body, "kv_transfer_params": {"do_remote_prefill": False}}
    assert post(url + "/v1/completions", local)[0] == 200
    params = _prefill_hop(trio, body)["kv_transfer_params"]
    status, out = post(url + "/v1/completions", {**body, "kv_transfer_params": params})
    assert status == 200 and out["disagg"]["kv_source"] == "transferred"
    assert count() == before + 1
