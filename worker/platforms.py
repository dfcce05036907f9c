"""Platform table: which KV buffer devices each accelerator supports, and how KV moves.

Pure layer (no torch, no NIXL). The operator's admission checks and the worker's start-up
checks both read this one table, so a pair the operator accepts is a pair the worker runs.

The table follows vLLM's NixlConnector (``_NIXL_SUPPORTED_DEVICE``): the first buffer device
of each platform is its native one. Out-of-tree platforms register themselves with
:func:`register_platform`, as upstream lets out-of-tree platforms extend its table.
"""

from __future__ import annotations

from dataclasses import dataclass

# NIXL memory-type names as the agent's register_memory() expects them.
DRAM = "DRAM"
VRAM = "VRAM"


@dataclass(frozen=True)
class Platform:
    """One accelerator kind.

    ``buffer_devices``: supported kv_buffer_device values, native first.
    ``gpu_resource``: the extended resource a pod must request to get the device
    (None for cpu). ``ucx_tls``: transports derived for pods on this platform when the
    user gives no override; chosen so that no transport needs CAP_SYS_PTRACE (no ``cma``)
    or a shared IPC namespace between pods (no ``cuda_ipc``/``sm``).
    """

    name: str
    buffer_devices: tuple[str, ...]
    gpu_resource: str | None
    ucx_tls: str

    @property
    def native_buffer(self) -> str:
        return self.buffer_devices[0]


_PLATFORMS: dict[str, Platform] = {}


def register_platform(platform: Platform) -> None:
    """Add or replace a platform (the extension point for out-of-tree accelerators)."""
    if not platform.buffer_devices:
        raise ValueError(f"platform {platform.name!r} needs at least one buffer device")
    _PLATFORMS[platform.name] = platform


for _p in (
    Platform("cpu", ("cpu",), None, "tcp,self"),
    Platform("cuda", ("cuda", "cpu"), "nvidia.com/gpu", "rc,ud,tcp,cuda_copy,self"),
    Platform("xpu", ("xpu", "cpu"), "gpu.intel.com/i915", "tcp,self"),
    Platform("tpu", ("cpu",), "google.com/tpu", "tcp,self"),
):
    register_platform(_p)


def platforms() -> dict[str, Platform]:
    """A copy of the registry, name → platform."""
    return dict(_PLATFORMS)


def get_platform(device: str) -> Platform:
    try:
        return _PLATFORMS[device]
    except KeyError:
        raise ValueError(
            f"unknown device {device!r}; supported devices: {', '.join(sorted(_PLATFORMS))}"
        ) from None


def memory_type(buffer_device: str) -> str:
    """NIXL memory type a KV buffer on ``buffer_device`` is registered as."""
    return DRAM if buffer_device == "cpu" else VRAM


def check_buffer_device(device: str, buffer_device: str) -> None:
    """Raise ValueError naming the allowed values when the pair is unsupported."""
    allowed = get_platform(device).buffer_devices
    if buffer_device not in allowed:
        raise ValueError(
            f"kv_buffer_device {buffer_device!r} is not supported on device {device!r}; "
            f"allowed: {', '.join(allowed)}"
        )


def derive_buffer_device(device: str, peer_device: str | None = None) -> str:
    """Default kv_buffer_device for a role on ``device`` talking to ``peer_device``.

    Same device on both sides: the native buffer (VRAM↔VRAM for cuda↔cuda). Different
    devices (e.g. cuda prefill, cpu decode): stage through host memory, the one memory type
    every platform supports, so both ends register DRAM.
    """
    platform = get_platform(device)
    if peer_device is None or peer_device == device:
        return platform.native_buffer
    return "cpu" if "cpu" in platform.buffer_devices else platform.native_buffer


# Memory types each NIXL backend plugin can move. The worker double-checks at run time
# with the agent's own answer (get_backend_mem_types), since NIXL only warns on a mismatch.
BACKEND_MEMORY: dict[str, frozenset[str]] = {
    "UCX": frozenset({DRAM, VRAM}),
    "UCCL": frozenset({DRAM, VRAM}),
    "LIBFABRIC": frozenset({DRAM, VRAM}),
    "MOONCAKE": frozenset({DRAM, VRAM}),
    "GDS": frozenset({VRAM}),
    "GDS_MT": frozenset({VRAM}),
}


def check_backends(backends: list[str], buffer_device: str) -> None:
    """Raise ValueError if a backend is unknown or cannot move this buffer's memory type."""
    if not backends:
        raise ValueError("backends must name at least one NIXL backend, e.g. [UCX]")
    needed = memory_type(buffer_device)
    for name in backends:
        kinds = BACKEND_MEMORY.get(name)
        if kinds is None:
            raise ValueError(
                f"unknown NIXL backend {name!r}; known: {', '.join(sorted(BACKEND_MEMORY))}"
            )
        if needed not in kinds:
            raise ValueError(
                f"NIXL backend {name!r} cannot move {needed} (kv_buffer_device "
                f"{buffer_device!r}); use one of: "
                f"{', '.join(sorted(b for b, k in BACKEND_MEMORY.items() if needed in k))}"
            )
