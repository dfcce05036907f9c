"""CUDA paths: VRAM registration and host staging (cuda + kv_buffer_device "cpu").

Marked ``gpu``: deselected by default, skipped without a CUDA device. Run on a GPU host
with ``pytest -m gpu tests/worker``. Two real processes on 127.0.0.1, bytes verified.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.agent import KVTransferAgent
from disagg_worker.transfer.copy import alloc_staging, copy_blocks
from disagg_worker.transfer.decode import Read
from disagg_worker.transfer.peer_process import PrefillProcess, alloc, pattern, spawn_prefill, words
from disagg_worker.transfer.peers import PeerRef, TransferError
from disagg_worker.transfer.rules.layout import KVLayout

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

LAYOUT = KVLayout(
    num_layers=4, num_kv_heads=2, head_dim=64, block_size=16, num_blocks=64, block_major=False
)
SEED = 11


def _check(caches: list[torch.Tensor], local: list[int], remote: list[int]) -> None:
    for r, t in enumerate(caches):
        w = words(t.cpu())
        for lb, rb in zip(local, remote, strict=True):
            assert torch.equal(w[lb], pattern(r, rb, LAYOUT.block_len, SEED)), (r, lb, rb)


@pytest.fixture(params=["cuda-vram", "cuda-staged", "cpu"])
def prefill(request: pytest.FixtureRequest) -> Iterator[tuple[str, PrefillProcess]]:
    kind = request.param
    fields: dict[str, object] = {"role": "prefill", "engine_id": "gp", "side_channel_port": 0}
    if kind == "cuda-vram":
        fields.update(device="cuda", kv_buffer_device="cuda")
    elif kind == "cuda-staged":
        fields.update(device="cuda", kv_buffer_device="cpu")
    proc = spawn_prefill(WorkerConfig.model_validate(fields), LAYOUT, seed=SEED)
    yield kind, proc
    proc.stop()


@pytest.mark.parametrize("decode_kind", ["cuda-vram", "cuda-staged", "cpu"])
def test_every_buffer_pair_moves_exact_bytes(prefill, decode_kind: str) -> None:
    kind, proc = prefill
    if (kind == "cuda-vram") != (decode_kind == "cuda-vram"):
        pytest.skip("VRAM on one side and DRAM on the other is refused by the compat hash")
    fields: dict[str, object] = {"role": "decode", "engine_id": "gd"}
    device = "cpu"
    if decode_kind != "cpu":
        device = "cuda"
        fields.update(device="cuda", kv_buffer_device="cuda" if kind == "cuda-vram" else "cpu")
    cfg = WorkerConfig.model_validate(fields)
    caches = alloc(LAYOUT, device)
    remote, local = [1, 2, 3, 40, 63], [10, 11, 12, 0, 5]
    with KVTransferAgent(cfg, LAYOUT, caches) as agent:
        proc.call("publish", "g1", remote)
        stats = agent.decode.read(Read(PeerRef("127.0.0.1", proc.port), "g1", remote, local))
    assert stats.bytes == len(remote) * LAYOUT.block_len * LAYOUT.num_regions
    _check(caches, local, remote)


def test_vram_and_dram_peers_are_refused_by_name() -> None:
    proc = spawn_prefill(
        WorkerConfig(role="prefill", device="cuda", kv_buffer_device="cuda", side_channel_port=0),
        LAYOUT,
        seed=SEED,
    )
    cfg = WorkerConfig(role="decode")
    try:
        with (
            KVTransferAgent(cfg, LAYOUT, alloc(LAYOUT)) as agent,
            pytest.raises(TransferError, match="memory_type DRAM != VRAM"),
        ):
            agent.decode.read(Read(PeerRef("127.0.0.1", proc.port), "x", [0], [0]))
    finally:
        proc.stop()


def test_staging_copies_between_device_and_host() -> None:
    dev = [torch.randn(32, 8, device="cuda") for _ in range(3)]
    host = alloc_staging(dev)
    assert all(t.is_pinned() for t in host)
    for ids in ([1, 2, 3], list(range(0, 30, 3))):  # slice path, gather/scatter path
        copy_blocks(dev, host, ids)
        back = [torch.zeros_like(t) for t in dev]
        copy_blocks(host, back, ids, [31 - i for i in ids])
        for d, b in zip(dev, back, strict=True):
            assert torch.equal(b[[31 - i for i in ids]], d[ids])
