"""Platform table: which KV buffer devices each accelerator supports, and how KV moves.

No torch, no NIXL: the operator's admission checks and the worker's start-up checks both
read this one table, so a pair the operator accepts is a pair the worker runs.

The table follows vLLM's NixlConnector (``_NIXL_SUPPORTED_DEVICE``): the first buffer device
of each platform is its native one. A table is a value (:data:`Table`, name → platform):
:data:`BUILTIN_TABLE` holds the built-ins, and out-of-tree platforms extend a copy of it
(:func:`extend`), as upstream lets out-of-tree platforms extend its own; the operator
extends it with what a platforms file declares (:mod:`disagg_contract.platform_file`). Every
lookup takes the table to read (the built-ins when omitted), so two operators in one
process never share a registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

# NIXL memory-type names as the agent's register_memory() expects them.
DRAM = "DRAM"
VRAM = "VRAM"


@dataclass(frozen=True)
class Platform:
    """One accelerator kind.

    ``buffer_devices``: supported kv_buffer_device values, native first.
    ``accelerator_resource``: the extended resource a pod must request to get the device
    (None for cpu). ``ucx_tls``: transports derived for pods on this platform when the
    user gives no override; chosen so that no transport needs CAP_SYS_PTRACE (no ``cma``)
    or a shared IPC namespace between pods (no ``cuda_ipc``/``sm``/``ze_ipc``), with the
    platform's UCX copy transport so UCX can move device memory. ``backends``: the NIXL
    backends usable on this platform (empty: every backend that moves the buffer's memory
    type). ``engine_device``: the device type vLLM reports on this platform
    (``current_platform.device_type``), the key of vLLM's buffer table; None: ``name``.
    ``memory_label``: a node label whose value is one device's memory in MiB (NVIDIA GPU
    Feature Discovery's ``nvidia.com/gpu.memory``), read when a pool's nodeSelector pins
    it; None: the pool states acceleratorMemory. ``note``: why the entry is what it is
    (printed in docs/derivation.md).

    rocm: vLLM runs AMD GPUs as device type "cuda" (``RocmPlatform.device_type``, with
    ``current_platform.is_rocm()`` for the differences) and NixlConnector checks
    kv_buffer_device against its "cuda" row, so rocm pools take the values cuda and cpu;
    what differs from cuda is the resource (amd.com/gpu) and UCX's ROCm copy transport.
    xpu: UCX moves Level Zero device memory with its ze_copy transport (UCX built with
    Level Zero support); without it UCX_TLS could only move host memory.
    """

    name: str
    buffer_devices: tuple[str, ...]
    accelerator_resource: str | None
    ucx_tls: str
    backends: tuple[str, ...] = ()
    engine_device: str | None = None
    memory_label: str | None = None
    note: str = ""

    @property
    def native_buffer(self) -> str:
        return self.buffer_devices[0]

    @property
    def vllm_device(self) -> str:
        """The key of this platform's row in vLLM's NixlConnector device table."""
        return self.engine_device or self.name


Table = Mapping[str, Platform]


def extend(table: Table, added: Iterable[Platform]) -> Table:
    """``table`` plus ``added`` (replacing platforms of the same name), as a new table:
    the extension point for out-of-tree accelerators."""
    out = dict(table)
    for platform in added:
        if not platform.buffer_devices:
            raise ValueError(f"platform {platform.name!r} needs at least one buffer device")
        out[platform.name] = platform
    return MappingProxyType(out)


BUILTIN: tuple[Platform, ...] = (
    Platform("cpu", ("cpu",), None, "tcp,self"),
    Platform(
        "cuda",
        ("cuda", "cpu"),
        "nvidia.com/gpu",
        "rc,ud,tcp,cuda_copy,self",
        memory_label="nvidia.com/gpu.memory",
        note="cuda_copy moves GPU memory",
    ),
    Platform(
        "rocm",
        ("cuda", "cpu"),
        "amd.com/gpu",
        "rc,ud,tcp,rocm_copy,self",
        engine_device="cuda",
        note="rocm_copy moves AMD GPU memory",
    ),
    Platform(
        "xpu",
        ("xpu", "cpu"),
        "gpu.intel.com/i915",
        "rc,ud,tcp,ze_copy,self",
        note="ze_copy (UCX's Level Zero copy transport) moves xpu memory",
    ),
    Platform("tpu", ("cpu",), "google.com/tpu", "tcp,self", note="KV staged in host memory"),
)
BUILTIN_NAMES = frozenset(p.name for p in BUILTIN)
BUILTIN_TABLE: Table = extend({}, BUILTIN)


def platforms(table: Table = BUILTIN_TABLE) -> dict[str, Platform]:
    """A copy of ``table``, name → platform."""
    return dict(table)


def get_platform(device: str, table: Table = BUILTIN_TABLE) -> Platform:
    try:
        return table[device]
    except KeyError:
        raise ValueError(
            f"unknown device {device!r}; supported devices: {', '.join(sorted(table))}"
        ) from None


def memory_type(buffer_device: str) -> str:
    """NIXL memory type a KV buffer on ``buffer_device`` is registered as."""
    return DRAM if buffer_device == "cpu" else VRAM


def check_buffer_device(device: str, buffer_device: str, table: Table = BUILTIN_TABLE) -> None:
    """Raise ValueError naming the allowed values when the pair is unsupported."""
    allowed = get_platform(device, table).buffer_devices
    if buffer_device not in allowed:
        raise ValueError(
            f"kv_buffer_device {buffer_device!r} is not supported on device {device!r}; "
            f"allowed: {', '.join(allowed)}"
        )


def derive_buffer_device(
    device: str, peer_device: str | None = None, table: Table = BUILTIN_TABLE
) -> str:
    """Default kv_buffer_device for a role on ``device`` talking to ``peer_device``.

    Same device on both sides: the native buffer (VRAM↔VRAM for cuda↔cuda). Different
    devices (e.g. cuda prefill, cpu decode): stage through host memory, the one memory type
    every platform supports, so both ends register DRAM.
    """
    platform = get_platform(device, table)
    if peer_device is None or peer_device == device:
        return platform.native_buffer
    return "cpu" if "cpu" in platform.buffer_devices else platform.native_buffer


# NIXL memory-segment names beyond the two a KV buffer registers as (what storage moves).
FILE = "FILE"
OBJ = "OBJ"
BLK = "BLK"
# The NIXL release whose plugin sources the backend table restates.
NIXL_RELEASE = "v1.4.0"


@dataclass(frozen=True)
class Backend:
    """One NIXL backend plugin as its source at :data:`NIXL_RELEASE` declares itself.

    ``memory``: the segment types its ``getSupportedMems()`` lists (DRAM, VRAM, FILE, OBJ,
    BLK). ``remote``: its ``supportsRemote()``: whether it can move memory to or from
    another agent (another pod); NIXL puts only such backends in the metadata a peer
    loads, so a transfer between pods runs on one of them whatever else is listed.
    ``notify``: its ``supportsNotif()`` (vLLM's decode tells prefill by notification that
    it has read). ``plugin``: its folder under ``src/plugins``. ``note``: why a row reads
    as it does (printed in docs/derivation.md).
    """

    name: str
    memory: frozenset[str]
    remote: bool
    notify: bool
    plugin: str
    note: str = ""


def _backend(name: str, memory: str, remote: bool, plugin: str, note: str = "") -> Backend:
    # NIXL refuses a remote backend without notifications (nixlAgent::createBackend), and
    # no local-only plugin of NIXL_RELEASE has them: notify follows remote.
    return Backend(name, frozenset(memory.split()), remote, remote, plugin, note)


# ai-dynamo/nixl NIXL_RELEASE, src/plugins/<plugin>/*_backend.h and *_plugin.cpp: the name
# each plugin registers, its supportsRemote()/supportsNotif() and getSupportedMems().
BACKENDS: tuple[Backend, ...] = (
    _backend("UCX", "DRAM VRAM", True, "ucx"),
    _backend("LIBFABRIC", "DRAM VRAM", True, "libfabric", "VRAM with a CUDA or Neuron runtime"),
    _backend("MOONCAKE", "DRAM VRAM", True, "mooncake"),
    _backend("UCCL", "DRAM VRAM", True, "uccl"),
    _backend("GPUNETIO", "DRAM VRAM", True, "gpunetio", "DOCA GPUNetIO; remote agents only"),
    _backend("GDS", "DRAM VRAM FILE", False, "cuda_gds", "GPUDirect Storage: file I/O"),
    _backend("GDS_MT", "DRAM VRAM FILE", False, "gds_mt", "GPUDirect Storage: file I/O"),
    _backend("POSIX", "DRAM FILE", False, "posix", "file I/O"),
    _backend("HF3FS", "DRAM FILE", False, "hf3fs", "3FS file I/O"),
    _backend("GUSLI", "DRAM BLK", False, "gusli", "block-device I/O"),
    _backend("OBJ", "DRAM OBJ", False, "obj", "S3 objects (VRAM too with an accelerated engine)"),
    _backend("AZURE_BLOB", "DRAM OBJ", False, "azure_blob", "Azure Blob objects"),
    _backend("INFINIA", "DRAM VRAM OBJ", False, "infinia", "DDN Infinia objects"),
)
BACKEND_TABLE: Mapping[str, Backend] = MappingProxyType({b.name: b for b in BACKENDS})
# Memory types each NIXL backend plugin can move. The worker double-checks at run time
# with the agent's own answer (get_backend_mem_types), since NIXL only warns on a mismatch.
BACKEND_MEMORY: Mapping[str, frozenset[str]] = MappingProxyType(
    {b.name: b.memory for b in BACKENDS}
)
REMOTE_BACKENDS = tuple(sorted(b.name for b in BACKENDS if b.remote))
LOCAL_BACKENDS = tuple(sorted(b.name for b in BACKENDS if not b.remote))
# What is wrong with a backends list that reaches no other pod, and the fix: the worker's
# start-up check and the operator's (its CEL rule's message) say it in these words.
LOCAL_ONLY_TEXT = (
    "lists no NIXL backend that can reach another pod, and prefill and decode always run "
    f"in different pods ({', '.join(LOCAL_BACKENDS)} move data within one pod: storage I/O); "
    f"use UCX, or add a network backend: {', '.join(REMOTE_BACKENDS)}"
)


class LocalOnlyBackends(ValueError):
    """A backends list none of whose backends can reach another agent."""


def reaches_peer(backends: Iterable[str]) -> bool:
    """Whether a listed backend can move KV to or from another pod."""
    return any(BACKEND_TABLE[b].remote for b in backends if b in BACKEND_TABLE)


def backend_markdown_table() -> str:
    """The NIXL backend table in docs/derivation.md (from :data:`BACKENDS`)."""
    lines = [
        f"| NIXL backend | memory | reaches another pod | notifications | plugin "
        f"({NIXL_RELEASE}) | note |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    yes = {True: "yes", False: "no"}
    for b in BACKENDS:
        memory = ", ".join(m for m in (DRAM, VRAM, FILE, OBJ, BLK) if m in b.memory)
        lines.append(
            f"| `{b.name}` | {memory} | {yes[b.remote]} | {yes[b.notify]} "
            f"| `src/plugins/{b.plugin}` | {b.note or '-'} |"
        )
    return "\n".join(lines) + "\n"


def check_backends(
    backends: list[str],
    buffer_device: str,
    device: str | None = None,
    table: Table = BUILTIN_TABLE,
) -> None:
    """Raise ValueError if a backend is unknown, cannot move this buffer's memory type, or
    is not among those ``device``'s platform lists; :class:`LocalOnlyBackends` if none of
    them can reach another pod (a list with one that can is fine: NIXL moves KV between
    agents only on such a backend, the others stay local)."""
    if not backends:
        raise ValueError("backends must name at least one NIXL backend, e.g. [UCX]")
    needed = memory_type(buffer_device)
    usable = get_platform(device, table).backends if device is not None else ()
    for name in backends:
        if usable and name not in usable:
            raise ValueError(
                f"NIXL backend {name!r} is not usable on device {device!r}; "
                f"use one of: {', '.join(usable)}"
            )
        kinds = BACKEND_MEMORY.get(name)
        if kinds is None:
            raise ValueError(
                f"unknown NIXL backend {name!r}; known: {', '.join(sorted(BACKEND_MEMORY))}"
            )
        if needed not in kinds:
            raise ValueError(
                f"NIXL backend {name!r} cannot move {needed} (kv_buffer_device "
                f"{buffer_device!r}); use one of: "
                f"{', '.join(b for b in REMOTE_BACKENDS if needed in BACKEND_MEMORY[b])}"
            )
    if not reaches_peer(backends):
        raise LocalOnlyBackends(f"{LOCAL_ONLY_TEXT} (found: {', '.join(backends)})")
