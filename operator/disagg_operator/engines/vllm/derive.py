"""Values derived for a vLLM deployment: its version and profile, ``--kv-transfer-config``,
the lease env, the side-channel ports, and the CPU engine's env on CPU pools.

What vLLM accepts comes from the capability profile of the deployment's vLLM version
(:mod:`disagg_operator.engines.vllm.contract`); no vLLM setting name is spelled here.

kv_role: kv_producer for prefill and kv_consumer for decode, valid in every vLLM
version; NixlConnector ignored it up to 0.22 and warns about kv_both from 0.23.
"""

from __future__ import annotations

import math
from typing import Any

from disagg_contract import platforms
from disagg_contract.platforms import Table
from disagg_operator.api import ROLES, DeploymentSpec, RoleSpec
from disagg_operator.contracts import lws
from disagg_operator.derive import transfer
from disagg_operator.derive.resources import cpu_limits, parse_quantity
from disagg_operator.engines.base import flag_values
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import fields as own
from disagg_operator.engines.vllm import modes

KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}
OMP_NUM_THREADS = "OMP_NUM_THREADS"

# vLLM's CPU engine, per TP rank: memory beyond the KV cache and the weights (measured
# with `disagg bench vllm-memory` on vLLM 0.32, tiny model: 1.42 GiB PSS, 1.8 GiB RSS, the
# same at 1 and 2 GiB of KV, each GiB of KV space costing 1.00 GiB; 3 GiB leaves room for
# the activations of larger models and allocator slack), the share of the rest given to
# the KV cache, and the smallest useful KV cache. A GPU role's host runtime takes the same.
CPU_RUNTIME_GIB = 3
CPU_KVCACHE_FRACTION = 0.75
CPU_MIN_KV_GIB = 1
# The least of a pool's CPUs kept out of OpenMP: NIXL's progress thread (vLLM always runs
# it) and the engine loop; a version's P/D reserve (Profile.reserved_cpus) may ask more.
CPU_PROGRESS_CORES = 1
# CPUs per rank kept out of OpenMP once nothing spins (the engine-idle shim's NIXL and
# queue levers both on): vLLM's reserve is one CPU per rank for its engine-core process
# ("TODO: make scheduler proc sleep when idle", utils/ompmultiprocessing.py in 0.32) and,
# from 0.20, one more for the NIXL connector; with both waits blocking, one per rank is
# left for the engine core, the API server and NIXL's threads, which work at every step
# (docs/derivation.md, "The CPU thread budget").
CPU_RESERVE_SPIN_FREE_PER_RANK = 1

_GIB = 1024**3


def role_images(spec: DeploymentSpec) -> tuple[tuple[str, str], ...]:
    """(the field that names it, image) of each pool's engine image, once per field."""
    fields = [(f"spec.{r}.image" if spec.role(r).image else "spec.engine.image", r) for r in ROLES]
    return tuple(dict.fromkeys((field, spec.image(r)) for field, r in fields))


def resolution(spec: DeploymentSpec) -> vllm.Resolution:
    """The vLLM version this deployment runs and its profile (engine.version, else tags)."""
    return vllm.resolve(spec.engine.version, role_images(spec))


def profile(spec: DeploymentSpec) -> vllm.Profile:
    return resolution(spec).profile


def mode_row(spec: DeploymentSpec) -> modes.ModeRow:
    """What this deployment's vLLM version does per transfer mode."""
    return modes.mode_row(resolution(spec).version)


def kv_transfer_config(spec: DeploymentSpec, role: str, table: Table) -> dict[str, Any]:
    """vLLM's ``--kv-transfer-config`` as that version's KVTransferConfig parses it."""
    p, kv = profile(spec), spec.kv_transfer
    extra: dict[str, Any] = {"backends": list(kv.backends)}
    if p.lease.kind == "extra":
        extra[p.lease.name] = transfer.lease_seconds(spec)
    if p.handshake_compat_key and transfer.mixed_attention(spec):
        extra[p.handshake_compat_key] = False
    mine = own.kv_transfer(spec)
    extra.update(mine.kv_connector_extra_config or {})
    config: dict[str, Any] = {
        "kv_connector": mode_row(spec).connector(kv.mode),
        "kv_role": KV_ROLE[role],
        "kv_buffer_device": transfer.buffer_device(spec, role, table),
        "kv_connector_extra_config": extra,
    }
    if mine.kv_load_failure_policy and p.failure_policy_default:
        config["kv_load_failure_policy"] = mine.kv_load_failure_policy
    return config


# The vLLM flags both pools get from one spec.modelConfig field (flag → field name).
POOL_FLAGS = {
    "--max-model-len": "maxModelLen",
    "--block-size": "blockSize",
    "--dtype": "dtype",
    "--kv-cache-dtype": "kvCacheDtype",
    "--quantization": "quantization",
}


def pool_values(spec: DeploymentSpec) -> dict[str, int | str | None]:
    """flag → the modelConfig value both pools render (None: not set)."""
    given = own.model(spec).model_dump(by_alias=True)
    return {flag: given[name] for flag, name in POOL_FLAGS.items()}


def pool_flags(spec: DeploymentSpec) -> list[str]:
    """The flags both pools get from spec.modelConfig (one value for the pair)."""
    out: list[str] = []
    for flag, value in pool_values(spec).items():
        if value is not None:
            out += [flag, str(value)]
    return out


def multinode_flags(spec: DeploymentSpec, role: str) -> list[str]:
    """An instance across ``nodesPerInstance`` pods: the node count, this pod's rank and
    the first pod's address, from the env LeaderWorkerSet gives every pod of a group
    (Kubernetes expands ``$(VAR)`` from the container's env; the leader is worker 0)."""
    nodes = spec.role(role).nodes_per_instance
    if nodes == 1:
        return []
    return [
        *(vllm.NNODES_FLAG, str(nodes)),
        *(vllm.NODE_RANK_FLAG, f"$({lws.ENV_WORKER_INDEX})"),
        *(vllm.MASTER_ADDR_FLAG, f"$({lws.ENV_LEADER_ADDRESS})"),
    ]


def pipeline_stages(spec: DeploymentSpec, role: str) -> int:
    """``--pipeline-parallel-size`` (``-pp``) of the role's args, 1 when absent or unreadable
    (vLLM's own parser refuses the latter at start)."""
    found = flag_values(spec.role(role).args, vllm.PIPELINE_PARALLEL_FLAGS)
    value = next(iter(found.values()), "1")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def data_parallel_size(role: RoleSpec) -> int:
    """``--data-parallel-size`` (``-dp``) of the role's args: the vLLM engines one pod runs,
    each with its own weights, KV cache and side channel; 1 when absent or unreadable
    (:mod:`.data_parallel` refuses the latter)."""
    found = data_parallel_arg(role)
    value = found[1] if found else "1"
    return int(value) if value.isdigit() and int(value) > 0 else 1


def data_parallel_arg(role: RoleSpec) -> tuple[int, str] | None:
    """(index in the role's args, value) of the last ``--data-parallel-size`` / ``-dp``
    (argparse's last one wins), None when absent."""
    args = list(role.args or [])
    found = [i for i, arg in enumerate(args) if arg.split("=", 1)[0] in vllm.DATA_PARALLEL_FLAGS]
    if not found:
        return None
    _, eq, value = args[found[-1]].partition("=")
    if not eq:
        value = args[found[-1] + 1] if found[-1] + 1 < len(args) else ""
    return found[-1], value


def lease_env(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """The lease as env, for versions that read it there (prefill holds the blocks)."""
    lease = profile(spec).lease
    if lease.kind != "env" or role != "prefill":
        return {}
    return {lease.name: str(transfer.lease_seconds(spec))}


def side_channel_ports(spec: DeploymentSpec, role: str) -> list[int]:
    """Handshake ports one pod of ``role`` listens on, by the version's rule: DP engine d
    on port + d (>= 0.11.1), or its TP rank r on port + d x TP + r (0.11.0)."""
    base, tp = spec.kv_transfer.side_channel_port, spec.role(role).tensor_parallel_size
    engines = data_parallel_size(spec.role(role))
    if not profile(spec).side_channel_per_tp_rank:
        return [base + d for d in range(engines)]
    return [base + rank for rank in range(engines * tp)]


def weights_bytes(spec: DeploymentSpec) -> float:
    """The model's weights in memory (spec.modelConfig.weightsMemory), 0 when not given."""
    given = own.model(spec).weights_memory
    return parse_quantity(given) if given is not None else 0.0


QUEUE_POLL_CPU_DEFAULT_US = 100


def engine_idle(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """The engine-idle shim's settings for ``role``'s engine, by env name (0: that lever
    off); none (no shim) when all are off: NIXL's progress delay on CPU pools, the queue
    poll where set and on CPU pools by default, the model thread's CPUs kept on CPU pools
    of versions whose NIXL worker pins it (docs/derivation.md, "vLLM's message queue" and
    "The NIXL worker pin")."""
    r = own.role(spec, role)
    cpu = spec.role(role).device == "cpu"
    delay = own.kv_transfer(spec).nixl_progress_delay_microseconds if cpu else 0
    poll = r.queue_poll_microseconds
    if poll is None:
        poll = QUEUE_POLL_CPU_DEFAULT_US if cpu else 0
    keep = r.keep_cpu_affinity
    if keep is None:
        keep = cpu
    keep = keep and cpu and profile(spec).nixl_pins_cpu
    if delay == 0 and poll == 0 and not keep:
        return {}
    # all, 0 included: the shim's own default for an absent setting is not the pool's
    return {
        vllm.NIXL_DELAY_ENV: str(delay),
        vllm.QUEUE_POLL_ENV: str(poll),
        vllm.AFFINITY_ENV: str(int(keep)),
    }


def needs_host_buffer(spec: DeploymentSpec, role: str, table: Table) -> bool:
    """An accelerator pool whose KV buffer is host memory: vLLM mirrors its device cache."""
    r = spec.role(role)
    return r.device != "cpu" and transfer.buffer_device(spec, role, table) == "cpu"


def accelerator_memory(spec: DeploymentSpec, role: str, table: Table) -> float | None:
    """One device's memory in bytes: spec.<role>.acceleratorMemory, else the platform's
    node label (MiB) where the pool's nodeSelector pins it; None when neither says."""
    r = spec.role(role)
    if r.accelerator_memory is not None:
        return parse_quantity(r.accelerator_memory)
    label = platforms.get_platform(r.device, table).memory_label
    value = (r.node_selector or {}).get(label) if label else None
    return float(value) * 1024**2 if value is not None and value.isdigit() else None


def pod_ranks(role: RoleSpec) -> int:
    """The ranks one pod of the role runs: its instance's, over ``nodesPerInstance`` pods,
    for each of its data-parallel engines (what a pod's memory and threads are sized for)."""
    return role.tensor_parallel_size // role.nodes_per_instance * data_parallel_size(role)


def pod_weights(role: RoleSpec, weights: float) -> float:
    """The pod's share of the model's weights (``weights`` bytes): a copy per data-parallel
    engine, split over the ``nodesPerInstance`` pods of an instance."""
    return weights * data_parallel_size(role) / role.nodes_per_instance


def host_buffer_bytes(spec: DeploymentSpec, role: str, table: Table) -> float | None:
    """The host memory a GPU pool's cpu KV buffer takes in one pod, all its ranks together
    (0 when it has none), or None when its size cannot be told (no device memory figure).

    vLLM's NIXL worker (``initialize_host_xfer_buffer``) allocates, per rank, a host tensor
    shaped like each layer's device KV tensor: the whole device KV cache. That cache is
    ``--kv-cache-memory-bytes`` when set, else at most the planned share of the device
    (``--gpu-memory-utilization`` x the device's memory) less the rank's weights; an upper
    bound, since activations take some of the share too. The share's default is the
    version's (:func:`.contract.gpu_memory_utilization_default`)."""
    if not needs_host_buffer(spec, role, table):
        return 0.0
    r = spec.role(role)
    flags = flag_values(r.args, (vllm.KV_CACHE_MEMORY_BYTES, vllm.GPU_MEMORY_UTILIZATION))
    tp, here = r.tensor_parallel_size, pod_ranks(r)
    try:
        if vllm.KV_CACHE_MEMORY_BYTES in flags:
            return float(here * vllm.human_readable_int(flags[vllm.KV_CACHE_MEMORY_BYTES]))
        given = flags.get(vllm.GPU_MEMORY_UTILIZATION)
        share = float(given) if given is not None else _default_share(spec, role, table)
    except ValueError:  # vLLM's own parser refuses it at start; nothing to size here
        return 0.0
    device = accelerator_memory(spec, role, table)
    if device is None:
        return None
    per_rank = device * share - weights_bytes(spec) / tp
    return here * max(0.0, per_rank)


def _default_share(spec: DeploymentSpec, role: str, table: Table) -> float:
    cuda_alike = platforms.get_platform(spec.role(role).device, table).vllm_device == "cuda"
    version = resolution(spec).version
    return vllm.gpu_memory_utilization_default(cuda_alike, version, spec.role(role).args or [])


def cpu_min_memory_gib(tp: int, weights: float = 0.0) -> int:
    """Smallest memory limit a vLLM CPU pool of ``tp`` ranks runs in: the runtimes, the
    weights (``weights`` bytes, all ranks together) and 1 GiB of KV per rank."""
    return math.ceil(tp * (CPU_RUNTIME_GIB + CPU_MIN_KV_GIB) + weights / _GIB)


def cpu_kvcache_gib(memory: float, tp: int, weights: float = 0.0) -> int:
    """KV cache per rank: a share of what the runtimes and the weights leave of the limit."""
    spare = (memory - tp * CPU_RUNTIME_GIB * _GIB - weights) * CPU_KVCACHE_FRACTION / tp
    return max(CPU_MIN_KV_GIB, math.floor(spare / _GIB))


def cpu_reserve(p: vllm.Profile, tp: int, spin_free: bool = False) -> int:
    """CPUs of a pool kept out of OpenMP (VLLM_CPU_NUM_OF_RESERVED_CPU): the version's P/D
    reserve for ``tp`` ranks, or, when nothing spins (``spin_free``), at most
    :data:`CPU_RESERVE_SPIN_FREE_PER_RANK` per rank; at least :data:`CPU_PROGRESS_CORES`."""
    reserve = p.reserved_cpus(tp)
    if spin_free:
        reserve = min(reserve, CPU_RESERVE_SPIN_FREE_PER_RANK * tp)
    return max(CPU_PROGRESS_CORES, reserve)


def spin_free(idle: dict[str, str]) -> bool:
    """Whether an engine with these engine-idle settings (:func:`engine_idle`) runs with
    neither of vLLM's spinning waits: the NIXL progress delay and the queue poll both on."""
    return all(idle.get(name, "0") != "0" for name in (vllm.NIXL_DELAY_ENV, vllm.QUEUE_POLL_ENV))


def cpu_threads(cpus: float, tp: int, reserve: int = CPU_PROGRESS_CORES) -> int:
    """OpenMP threads per rank: the pod's whole cores less the reserve, split by TP."""
    return max(1, (math.floor(cpus) - reserve) // tp)


def cpu_engine_env(
    role: RoleSpec, p: vllm.Profile, weights: float = 0.0, spin_free: bool = False
) -> dict[str, str]:
    """vLLM CPU-engine env for a pool on device cpu (empty for other devices); the reserve
    as :func:`cpu_reserve` gives it.

    nobind: OpenMP never pins, so two pods on one node cannot bind the same cores under
    either kubelet CPU policy; the thread count keeps the pool inside its CPU budget.
    """
    if role.device != "cpu":
        return {}
    cpus, memory = cpu_limits(role)
    tp = pod_ranks(role)  # the pod's share of the instance's ranks and of its weights
    weights = pod_weights(role, weights)
    engines = data_parallel_size(role)  # each reads the reserve as its own
    env = {vllm.CPU_OMP_THREADS_BIND: "nobind"}
    reserve = cpu_reserve(p, tp // engines, spin_free)
    if cpus is not None:
        env[OMP_NUM_THREADS] = str(cpu_threads(cpus, tp, reserve * engines))
    env[vllm.CPU_RESERVED] = str(reserve)
    if memory is not None:
        env[vllm.CPU_KVCACHE_SPACE] = str(cpu_kvcache_gib(memory, tp, weights))
    return env
