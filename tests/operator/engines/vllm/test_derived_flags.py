"""Args that would replace what render derives for vLLM are refused, read as vLLM 0.32.0's
own parser reads them (FlexibleArgumentParser: underscores are dashes, ``--flag.key=v``
sets a key of the JSON flag ``--flag``), naming the field to use instead; among them the
CPU KV tier's flags, which make VllmConfig replace NixlConnector with OffloadingConnector
(``_post_init_kv_transfer_config``, vllm/config/vllm.py)."""

from __future__ import annotations

import pytest

from disagg_operator.validation import spec as validation
from tests.operator.builders import vllm_gpu_cpu


@pytest.mark.parametrize(
    ("arg", "field_to_use"),
    [
        ("--tensor_parallel_size=2", "spec.prefill.tensorParallelSize"),
        ("--kv-transfer-config.kv_connector=OffloadingConnector", "spec.kvTransfer"),
        ("--kv_transfer_config.kv_role", "spec.kvTransfer"),
        ("--kv-offloading-size", "spec.prefill.kvOffloadMemory"),
        ("--kv-offloading-size=8", "a CPU KV tier beside it"),
        ("--kv_offloading_size=8", "OffloadingConnector"),
        ("--kv-offloading-backend=native", "spec.prefill.kvOffloadMemory"),
    ],
)
def test_vllm_0_32_0_connector_replacing_args_are_refused(arg: str, field_to_use: str) -> None:
    obj = vllm_gpu_cpu()
    obj["spec"]["prefill"]["args"] = ["--max-num-seqs", "8", arg, "1"]
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.prefill.args[2]" and field_to_use in problem.message
    assert problem.message.startswith(f"{arg.split('=')[0].split('.')[0].replace('_', '-')} ")


@pytest.mark.parametrize(
    "arg", ["--max_num_seqs=8", "--kv-events-config.enable_kv_cache_events=true"]
)
def test_args_that_only_look_alike_pass(arg: str) -> None:
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["args"] = [arg]
    assert validation.parse(obj)[1] == []
