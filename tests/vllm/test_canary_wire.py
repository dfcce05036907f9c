"""The transfer canary between real vLLM engines names the wire beside vLLM's own figures.

vLLM's NIXL agent cannot be asked which transport UCX chose for it; the canary's wire probe
(our agents, the same UCX settings) says it, and vLLM's ``vllm:nixl_*`` sums around the
canary's request give the KV's bytes and seconds, the cross-check. Here the engines and the
wire peer are processes of one host (`disagg up` of examples/vllm-cpu.yaml): UCX sees the
peer intra-node and reads through shared memory (CMA), as expected there.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from disagg_worker.serve.canary import Canary
from disagg_worker.serve.canary_config import CanaryConfig
from disagg_worker.serve.rules.canary_verdict import Result

from .conftest import Stack

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


@pytest.fixture
def wire_peer() -> Iterator[int]:
    """A `disagg worker wire peer` on loopback; its port."""
    argv = [sys.executable, "-m", "disagg_worker.transfer.wire", "peer", "--host", "127.0.0.1"]
    proc = subprocess.Popen([*argv, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{") and json.loads(line).get("event") == "ready":
                yield int(json.loads(line)["http_port"])
                break
        else:
            raise AssertionError(f"the wire peer exited {proc.wait()} before it was ready")
    finally:
        proc.kill()
        proc.wait()


async def _canary(prefill: str, decode: str, port: int) -> Result:
    config = CanaryConfig(
        prefill, decode, "tiny-llama", timeout_s=60, interval_s=1, fresh_s=60,
        wire_peer_port=port, expect_wire={"intra-node": ("shared-memory",)},
    )  # fmt: skip
    canary = Canary(config)
    await canary.start()
    try:
        await canary.once()  # the warm-up, then the canary
        result = await canary.once()
        await canary.probe_wire()
        return canary.wired(result)
    finally:
        await canary.close()


def test_the_canary_names_the_wire_beside_vllms_kv_figures(pd_stack: Stack, wire_peer: int) -> None:
    result = asyncio.run(_canary(pd_stack.url("prefill"), pd_stack.url("decode"), wire_peer))
    assert result.passed, result.problem
    assert result.wire is not None and result.odd is None, result
    assert (result.wire.scope, result.wire.wire) == ("intra-node", "shared-memory")
    assert result.wire.chose.startswith("cma/")
    # vLLM's own figures for the canary's KV: the growth of its NIXL sums
    assert result.transfer is not None and result.transfer.via == "metrics", result
    assert result.transfer.nbytes > 0 and result.transfer.seconds > 0
