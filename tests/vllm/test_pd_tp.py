"""Real vLLM with different tensor-parallel sizes: prefill TP 1 → decode TP 2 (two CPU
worker processes, one KV head each), from the operator's rendered pods behind the disagg
proxy, judged against aggregated vLLM TP 1.

vLLM's NixlConnector maps the ranks itself (each decode rank reads its head's half of every
prefill block; the prefill frees a block after both ranks' notifications). What this proves
is ours: the operator renders and validates the pair, `disagg up` binds one core list per
rank, and the tokens and vLLM's own transfer counters show the KV moved.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import Stack, _manifest, assert_pd_equals_aggregated, launched, prompts

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def tp_stack(
    aggregated_tokens: list[list[int]], tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """examples/vllm-cpu.yaml with decode at tensorParallelSize 2 (the memory the operator
    derives for two ranks), as `disagg up` runs it."""
    body = _manifest(tiny_llama)
    decode = body["spec"]["decode"]
    decode["tensorParallelSize"] = 2
    decode["resources"] = {"requests": {"cpu": "1", "memory": "10Gi"},
                           "limits": {"cpu": "2", "memory": "10Gi"}}  # fmt: skip
    yield from launched(body, tmp_path_factory.mktemp("pd-tp"))


def test_decode_tp2_from_prefill_tp1_equals_aggregated_vllm(
    tp_stack: Stack, aggregated_tokens: list[list[int]]
) -> None:
    # three prompt lengths: a TP-2 decode on two shared cores is slow
    assert_pd_equals_aggregated(tp_stack, prompts()[::3], aggregated_tokens[::3], wait_s=60.0)
