"""vLLM's part of the generated docs: its rows and its per-version tables in
docs/derivation.md (:class:`~disagg_operator.engines.base.EngineDocs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from disagg_operator.derive import model as model_source
from disagg_operator.engines.base import EngineDocs, Row
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import cpu_tier, derive, event_rows, modes
from disagg_operator.engines.vllm.engine import NAME

if TYPE_CHECKING:
    from disagg_operator.engines.settings import Settings


class VllmDocs(EngineDocs):
    name = NAME

    def derivation_tables(self) -> list[str]:
        return [vllm.profile_table(), modes.mode_table(), event_rows.events_table()]

    def derivation_rows(self, settings: Settings) -> list[Row]:
        return [*_rows(), *modes.rows(), *cpu_tier.rows()]


def _rows() -> list[Row]:
    lease, compat = vllm.NEWEST.lease, vllm.NEWEST.handshake_compat_key
    since_extra = vllm.format_version(next(p.since for p in vllm.PROFILES if p.lease == lease))
    old_lease = vllm.PROFILES[0].lease.name
    port_rule = vllm.first_version("side_channel_per_tp_rank")
    one_port = vllm.first_version("data_parallel")
    cpu = "vllm, device cpu"
    return [
        (
            "startupProbe budget",
            "vllm, spec.modelConfig.weightsMemory W",
            f"{model_source.START_BASE_S} s + W / 100 MB/s (+ W / 25 MB/s for a hub id), "
            f"{model_source.START_UNKNOWN_S} s without W; spec.<role>.startupSeconds wins",
            "initialisation, profiling and graph capture, then the weights from a network "
            "volume (or downloaded first); liveness and readiness count only after it",
        ),
        (
            "kv_role",
            "role prefill",
            derive.KV_ROLE["prefill"],
            "valid in every version; no warning",
        ),
        ("kv_role", "role decode", derive.KV_ROLE["decode"], "valid in every version; no warning"),
        (
            "side-channel ports",
            f"vllm >= {one_port}, --data-parallel-size N in the pool's args (else 1)",
            "sideChannelPort + d for DP engine d < N",
            "one listener per engine (its scheduler serves every TP rank's metadata); each "
            "declared, in the role's Service, and proven by the canary per rank",
        ),
        (
            "side-channel ports",
            f"vllm {port_rule}, TP rank r",
            "sideChannelPort + r",
            "a listener per TP rank; --data-parallel-size is refused (no "
            f"{vllm.DP_RANK_HEADER} header: the canary cannot reach each engine)",
        ),
        (
            "preStop",
            "vllm, lease L",
            "sleep round(L)",
            "vLLM has no endpoint that says its transfers are done: wait out the lease",
        ),
        (
            f"extra config {lease.name}",
            f"vllm >= {since_extra}, both roles",
            "round(blockLeaseSeconds)",
            f"int seconds; decode heartbeats every lease // 6 s (so >= {lease.minimum}); "
            "DisaggKVLeaseExpiring or DisaggKVReadAfterExpiry: raise blockLeaseSeconds above "
            "decode's queueing plus transfer time",
        ),
        (
            old_lease,
            f"vllm < {since_extra}, prefill",
            "round(blockLeaseSeconds)",
            f"prefill frees unread blocks; vLLM >= {since_extra} ignores this env",
        ),
        (
            f"extra config {compat}",
            f"vllm >= {vllm.first_version('handshake_compat_key')}, prefill device != decode "
            "device",
            "false",
            "the compat hash includes the attention backend, which differs across device "
            "types; same devices: omitted (vLLM's default true)",
        ),
        (
            "kv_load_failure_policy",
            f"vllm >= {vllm.first_version('failure_policy_default')}, "
            "kvTransfer.kvLoadFailurePolicy",
            "kvTransfer.kvLoadFailurePolicy",
            "top-level KVTransferConfig field; omitted: vLLM's default",
        ),
        (vllm.CPU_OMP_THREADS_BIND, cpu, "nobind", "never pin: no two pods share pinned cores"),
        (
            derive.OMP_NUM_THREADS,
            f"{cpu}, C CPUs (limit, else request), TP t, N DP engines, reserve R "
            f"({vllm.CPU_RESERVED}, below)",
            "max(1, (floor(C) - N x R) // (N x t))",
            "the reserve vLLM keeps for NIXL, the engine core and the API server stays free "
            "of OpenMP threads; each DP engine runs t ranks and keeps R",
        ),
        (
            vllm.CPU_RESERVED,
            f"{cpu}, TP t, engine-idle NIXL delay and queue poll",
            f"max({derive.CPU_PROGRESS_CORES}, vLLM's P/D minimum); both levers on: at most "
            f"{derive.CPU_RESERVE_SPIN_FREE_PER_RANK} x t",
            "vLLM's minimum is a CPU per rank for its spinning engine core and, from 0.20, "
            "one for NIXL's spinning thread; neither spins with the levers on (vLLM >= 0.20 "
            "then logs that the reserve is below its minimum); 0.17-0.19 forces 1",
        ),
        (
            vllm.CPU_KVCACHE_SPACE,
            f"{cpu}, memory limit M, TP t, N DP engines, weights W "
            "(modelConfig.weightsMemory, else 0)",
            f"max(1, floor((M - N x t x {derive.CPU_RUNTIME_GIB} GiB - N x W) * "
            f"{derive.CPU_KVCACHE_FRACTION} / (N x t) / GiB))",
            f"runtime ~{derive.CPU_RUNTIME_GIB} GiB per rank (0.32, tiny model: 1.4 GiB PSS "
            "measured), a copy of the weights per DP engine; "
            f"M < N x (t x {derive.CPU_RUNTIME_GIB + derive.CPU_MIN_KV_GIB} GiB + W) is refused",
        ),
    ]
