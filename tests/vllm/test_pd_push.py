"""Real vLLM in push mode (spec.kvTransfer.mode: push, examples/vllm-cpu-push.yaml): the
prefill WRITEs each prompt's KV into the blocks the decode registered (vLLM's
NixlPushConnector, a cpu buffer on both CPU pools), from the operator's rendered pods
behind the disagg proxy, judged against aggregated vLLM.

In push mode the prefill posts the transfers, so vLLM's own transfer figures are in the
prefill's log (a pull pair's are in the decode's: test_pd.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_tools.local import serving as local_serving
from disagg_tools.vllm.rules import metrics

from .conftest import ROOT, Stack, greedy, launched, prompts

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

PUSH_CPU = ROOT / "examples" / "vllm-cpu-push.yaml"


def _push_manifest(model: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(PUSH_CPU.read_text())
    body["metadata"].update(namespace="default", uid="local")
    body["spec"]["model"] = str(model)
    return body


@pytest.fixture(scope="module")
def push_stack(
    aggregated_tokens: list[list[int]], tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    yield from launched(_push_manifest(tiny_llama), tmp_path_factory.mktemp("pd-push"))


def _connector(argv: list[str]) -> str:
    config = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    name: str = config["kv_connector"]
    return name


def test_both_pools_run_vllms_push_connector(push_stack: Stack) -> None:
    engines = [c for c in push_stack.run.children if "--kv-transfer-config" in c.argv]
    assert len(engines) == 2, [c.name for c in push_stack.run.children]
    assert {_connector(c.argv) for c in engines} == {"NixlPushConnector"}


def test_push_tokens_equal_aggregated_vllm_and_the_prefill_wrote_them(
    push_stack: Stack, aggregated_tokens: list[list[int]]
) -> None:
    """Token for token what aggregated vLLM answers, and the KV really moved: the
    prefill's own metrics count one NIXL WRITE per prompt, none failed (a decode that
    recomputed would give the same tokens)."""
    since = local_serving.log_size(push_stack.log("prefill"))
    got = [greedy(push_stack.proxy, p) for p in prompts()]
    for n, (mine, theirs) in enumerate(zip(got, aggregated_tokens, strict=True)):
        assert mine == theirs, f"prompt {n} ({len(prompts()[n])} tokens) differs"
    figures = local_serving.transfer_figures(
        push_stack.log("prefill"), since, wait_s=30.0, expect=len(got)
    )
    assert figures[metrics.COUNT] >= len(got), figures
    assert figures[metrics.FAILED] == 0, figures
