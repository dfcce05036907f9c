"""UCX's TCP settings between peers that differ: a READ between a pod with the settings
the operator renders for TCP pools and one on UCX's defaults is byte-exact both ways, as in
a rollout that has rolled one pool and not yet the other. A sending segment above a
default peer's receive segment is what breaks it (the reason the rendered one stops at
``ucx.DEFAULT_RX_SEG_SIZE``). Two real processes on 127.0.0.1, UCX over tcp alone; the
decode side runs in a child interpreter too: the failing case cannot take the test run
with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch

from disagg_contract import ucx
from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.decode import Read
from disagg_worker.transfer.peer_process import alloc, pattern, spawn_prefill, words
from disagg_worker.transfer.peers import PeerRef, TransferError
from disagg_worker.transfer.rules.layout import KVLayout

# 8 MiB of K and V over 64 blocks, block-major: a READ of many of the rendered segments
LAYOUT = KVLayout(
    num_layers=4, num_kv_heads=8, head_dim=64, block_size=16, num_blocks=64, block_major=True
)
SEED = 3
DEFAULTS: dict[str, str] = {}
LARGE = {"UCX_TCP_TX_SEG_SIZE": "1m", "UCX_TCP_RX_SEG_SIZE": "1m"}
NAMES = {*ucx.tcp_env(), *LARGE}


@pytest.fixture(autouse=True)
def _ucx_env_restored() -> Iterator[None]:
    """UCX reads its settings from this process's environment, which these tests set: each
    test gives back the UCX_* it found, so no later test in this process inherits them."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("UCX_")}
    yield
    for name in [k for k in os.environ if k.startswith("UCX_")]:
        del os.environ[name]
    os.environ.update(saved)


def _env(over: dict[str, str]) -> None:
    os.environ["UCX_TLS"] = "tcp,self"
    for name in NAMES:
        os.environ.pop(name, None)
    os.environ.update(over)


def _read(prefill_env: dict[str, str], decode_env: dict[str, str]) -> str:
    """One READ of every block from a prefill with ``prefill_env`` into a decode (this
    process) with ``decode_env``: "exact", "wrong bytes" or the error."""
    _env(prefill_env)
    cfg = WorkerConfig(
        role="prefill", engine_id="p0", side_channel_port=0, block_lease_s=10,
        transfer_deadline_s=5,
    )  # fmt: skip
    prefill = spawn_prefill(cfg, LAYOUT, seed=SEED)
    _env(decode_env)
    try:
        caches = alloc(LAYOUT)
        ids = list(range(LAYOUT.num_blocks))
        dcfg = WorkerConfig(role="decode", engine_id="d0", transfer_deadline_s=5)
        with KVTransferAgent(dcfg, LAYOUT, caches) as agent:
            prefill.call("publish", "r", ids)
            try:
                stats = agent.decode.read(
                    Read(PeerRef("127.0.0.1", prefill.port, "p0"), "r", ids, ids)
                )
            except TransferError as e:
                return str(e)
        exact = stats.bytes == 8 << 20 and all(
            torch.equal(words(t)[b], pattern(r, b, LAYOUT.block_len, SEED))
            for r, t in enumerate(caches)
            for b in ids
        )
        return "exact" if exact else "wrong bytes"
    finally:
        prefill.stop()


def read_between(prefill_env: dict[str, str], decode_env: dict[str, str]) -> str:
    """:func:`_read` in a child interpreter running this file; "exit N" when it died
    without an answer (a crash there is not one here)."""
    args = [json.dumps(prefill_env), json.dumps(decode_env)]
    done = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, timeout=120
    )
    lines = done.stdout.strip().splitlines()
    return lines[-1] if done.returncode == 0 and lines else f"exit {done.returncode}"


@pytest.mark.parametrize("side", ["prefill", "decode"])
def test_the_rendered_settings_read_from_and_into_a_peer_on_ucx_defaults(side: str) -> None:
    tuned = ucx.tcp_env()
    envs = (tuned, DEFAULTS) if side == "prefill" else (DEFAULTS, tuned)
    assert read_between(*envs) == "exact"


def test_a_segment_above_a_default_peers_receive_fails_its_reads() -> None:
    assert read_between(DEFAULTS, LARGE) == "exact"  # a large receive takes small sends
    assert read_between(LARGE, DEFAULTS) != "exact"  # a default receive refuses 1m ones


if __name__ == "__main__":
    print(_read(json.loads(sys.argv[1]), json.loads(sys.argv[2])))
