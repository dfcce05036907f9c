"""Which prefill/decode tensor-parallel pairs a vLLM version serves: the rules of its
profile, or, when the version is unresolved (no profile), the safe ones (TP pairs a
multiple apart, prefill never above decode). The reference engine maps KV heads between
any sizes its presets split (engines/reference).

Part of engines.vllm.
"""

from __future__ import annotations

from collections.abc import Iterator

from disagg_operator.api import DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.engines.vllm import contract as vllm


def problems(spec: DeploymentSpec, p: vllm.Profile | None) -> Iterator[Problem]:
    """Decode TP a multiple of prefill TP; prefill TP above decode TP only where ``p``
    serves it: vLLM >= 0.14, prefill TP a multiple of decode TP and prefill's KV heads
    not replicated (TP < heads up to 0.19, TP <= heads from 0.20)."""
    pt, dt = spec.prefill.tensor_parallel_size, spec.decode.tensor_parallel_size
    heads = spec.model_spec.num_key_value_heads
    field = "spec.prefill.tensorParallelSize"
    if pt <= dt:
        if dt % pt:
            yield Problem(
                "spec.decode.tensorParallelSize",
                f"{dt} is not a multiple of spec.prefill.tensorParallelSize {pt}; "
                f"use {pt * (dt // pt + 1)}",
            )
        return
    if p is None or heads is None:
        more = "" if p is None else " (or set spec.modelConfig.numKeyValueHeads to allow more)"
        yield Problem(
            field,
            f"{pt} exceeds spec.decode.tensorParallelSize {dt}; lower prefill TP or raise "
            f"decode TP{more}",
        )
    elif not p.prefill_tp_above_decode:
        yield Problem(
            field,
            f"{pt} exceeds spec.decode.tensorParallelSize {dt}, which vLLM "
            f"{p.label} cannot serve; use vLLM >= "
            f"{vllm.first_version('prefill_tp_above_decode')} or prefill TP <= decode TP",
        )
    elif pt % dt:
        yield Problem(field, f"{pt} is not a multiple of spec.decode.tensorParallelSize {dt}")
    elif pt > heads or (pt == heads and p.replicated_at_equal_heads):
        limit = "below" if p.replicated_at_equal_heads else "at most"
        yield Problem(
            field,
            f"{pt} replicates prefill's KV heads (numKeyValueHeads {heads}) and exceeds "
            f"decode TP {dt}; vLLM {p.label} needs prefill TP {limit} the KV heads here: "
            "lower prefill TP or raise decode TP",
        )
