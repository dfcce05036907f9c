"""vLLM's own spec fields, at the paths users write them: ``spec.modelConfig`` (the flags
both pools must agree on), ``spec.kvTransfer`` (its connector's options) and
``spec.prefill`` / ``spec.decode`` (its image's NIXL, its CPU engine's idle loop).

They join the shared blocks through :class:`~disagg_operator.api.extension.EngineFields`
(the CRD, the parse and docs/crd.md carry them); another engine's spec that sets one is
refused by validation. The readers below give this engine's values of a parsed spec.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from disagg_operator.api import DeploymentSpec, EngineFields
from disagg_operator.api.base import FreeForm, Quantity, _Model


class ModelFields(_Model):
    """spec.modelConfig: the model's facts vLLM is told, one value for both pools."""

    max_model_len: int | None = Field(
        default=None,
        ge=1,
        description="vllm: the longest prompt plus output, rendered as --max-model-len on "
        "both pools (one value: a prefill that accepts longer prompts than its decode "
        "prefills what decode then refuses); vLLM's default from the model when omitted",
    )
    weights_memory: Quantity | None = Field(
        default=None,
        description="vllm: the model's weights in memory, a quantity (e.g. 16Gi for an 8B "
        "model in bf16); a CPU pool's KV space is what its memory limit leaves after the "
        "runtime and the weights, and a limit that cannot hold them is refused. `disagg up "
        "--model DIR` reads it from the checkpoint's files",
    )
    block_size: int | None = Field(
        default=None,
        ge=1,
        description="vllm: tokens per KV block, rendered as --block-size on both pools "
        "(P/D pairs need one block size); vLLM's platform default when omitted. Required "
        "for pools of different devices (a cpu decode: a multiple of 32)",
    )
    dtype: Literal["bfloat16", "float16", "float32"] | None = Field(
        default=None,
        description="vllm: the model's compute dtype, rendered as --dtype on both pools. "
        "Required for pools of different devices: vLLM's handshake check that compares it "
        "is off for such pairs, and a float16 prefill feeding a bfloat16 decode passes "
        "every size check and produces wrong tokens",
    )
    kv_cache_dtype: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9_]+$",
        description="vllm: the KV cache's dtype, rendered as --kv-cache-dtype on both pools "
        "(auto: the model's dtype; fp8, fp8_e4m3, ...). Required for pools of different "
        "devices, and auto with a cpu decode (its KV repack takes no fp8)",
    )
    quantization: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9_-]+$",
        description="vllm: the weights' quantization method, rendered as --quantization on "
        "both pools (no vLLM version compares it between prefill and decode); the model's "
        "own when omitted",
    )


class KVTransferFields(_Model):
    """spec.kvTransfer: NixlConnector's options."""

    kv_load_failure_policy: Literal["fail", "recompute"] | None = Field(
        default=None,
        description="vLLM >= 0.13 kv_load_failure_policy: fail the request or recompute "
        "the prefill locally when a KV load fails; vLLM's default when omitted",
    )
    nixl_progress_delay_microseconds: int = Field(
        default=5000,
        ge=0,
        le=1_000_000,
        description="vllm, CPU pools: how long NIXL's progress thread waits for a UCX event "
        "before it looks again (NIXL's Python API sets 0: the thread spins and an idle engine "
        "burns a core; an event wakes it at once, whatever the delay). Rendered as a "
        "sitecustomize module on the engine's PYTHONPATH "
        "(ConfigMap <name>-engine-idle); 0 leaves NIXL's spin as it is",
    )
    kv_connector_extra_config: FreeForm | None = Field(
        default=None,
        description="extra keys merged into kv_connector_extra_config (vLLM reads them "
        "unchecked); keys the operator derives (backends, kv_lease_duration, "
        "enforce_handshake_compat) are refused",
    )


class RoleFields(_Model):
    """spec.prefill and spec.decode: the pool's image and its CPU engine."""

    queue_poll_microseconds: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="vllm: for a second after each message on vLLM's shared-memory queue, "
        "its readers (the engine core waiting for its workers, each worker for the next "
        "step) check it again in a sched_yield loop, a core per waiting process; they block "
        "on the queue's own notification instead and check again after this long at most "
        "(whole milliseconds), longer as the wait goes on (a fiftieth of it, at most 2 ms): "
        "the engine-idle sitecustomize, ConfigMap <name>-engine-idle. Default 100 "
        "on CPU pools, vLLM's loop elsewhere; 0 leaves vLLM's loop as it is",
    )
    keep_cpu_affinity: bool | None = Field(
        default=None,
        description="vllm: vLLM's NIXL worker (>= 0.17, CPU pools) pins the thread that runs "
        "the model to the host's highest CPU of each NUMA node, so the model computes on one "
        "CPU whatever the pod's binding (and every engine on a node on the same one); true "
        "gives that thread its CPUs back once the connector is built and skips a pin "
        "outside the pod's cpuset: the engine-idle "
        "sitecustomize, ConfigMap <name>-engine-idle. Default true on CPU pools of versions "
        "that pin; false leaves vLLM's pin as it is",
    )
    kv_offload_memory: Quantity | None = Field(
        default=None,
        description="vllm, GPU pools (cuda, rocm; xpu from vLLM 0.23): a CPU KV tier, the "
        "host memory of one pod (a quantity, e.g. 64Gi) that keeps KV blocks evicted from "
        "the device cache for later prompts, split evenly among the pod's data-parallel "
        "engines. Rendered as MultiConnector(NixlConnector, OffloadingConnector) in "
        "--kv-transfer-config (vLLM >= 0.14; its --kv-offloading-size would replace the P/D "
        "connector); resources.limits.memory must hold it beside the runtime and any host "
        "KV buffer. Refused on cpu pools: their KV cache is host memory already",
    )
    nixl_version: str | None = Field(
        default=None,
        pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$",
        description="vllm: the NIXL release this role's image ships (`pip show nixl` "
        "in it; vLLM 0.32's CUDA 13 image pins 1.5.0, its CUDA 12 one 1.4.1). Both pools "
        "must name one release; required on both when pools of different devices run "
        "different images (vLLM compares no NIXL version)",
    )


FIELDS = EngineFields(model_spec=ModelFields, kv_transfer=KVTransferFields, role=RoleFields)
# the weights' size sizes memory, not the KV: not in the KV-compatibility key
NOT_KV = frozenset({"weights_memory"})


def model(spec: DeploymentSpec) -> ModelFields:
    """spec.modelConfig's vLLM fields (their defaults where the spec was parsed without
    this engine's fields: it cannot have set them)."""
    block = spec.model_spec
    return block if isinstance(block, ModelFields) else ModelFields()


def kv_transfer(spec: DeploymentSpec) -> KVTransferFields:
    """spec.kvTransfer's vLLM fields."""
    block = spec.kv_transfer
    return block if isinstance(block, KVTransferFields) else KVTransferFields()


def role(spec: DeploymentSpec, name: str) -> RoleFields:
    """spec.<name>'s vLLM fields."""
    block = spec.role(name)
    return block if isinstance(block, RoleFields) else RoleFields()
