"""Platform table: the supported device → kv_buffer_device pairs and their derivation."""

from __future__ import annotations

import pytest

from disagg_contract import platforms
from disagg_contract.platforms import Platform


@pytest.mark.parametrize(
    ("device", "allowed"),
    [("cpu", {"cpu"}), ("cuda", {"cuda", "cpu"}), ("xpu", {"xpu", "cpu"}), ("tpu", {"cpu"})],
)
def test_supported_pairs(device: str, allowed: set[str]) -> None:
    for buf in ("cpu", "cuda", "xpu", "tpu"):
        if buf in allowed:
            platforms.check_buffer_device(device, buf)
        else:
            with pytest.raises(ValueError, match=f"not supported on device '{device}'"):
                platforms.check_buffer_device(device, buf)


def test_unsupported_pair_names_the_allowed_values() -> None:
    with pytest.raises(ValueError, match="'cuda' is not supported on device 'tpu'; allowed: cpu"):
        platforms.check_buffer_device("tpu", "cuda")


@pytest.mark.parametrize(
    ("device", "peer", "buffer"),
    [
        ("cuda", None, "cuda"),
        ("cuda", "cuda", "cuda"),
        ("cuda", "cpu", "cpu"),  # heterogeneous: stage through host memory
        ("cpu", "cuda", "cpu"),
        ("tpu", None, "cpu"),
    ],
)
def test_derived_buffer_device(device: str, peer: str | None, buffer: str) -> None:
    assert platforms.derive_buffer_device(device, peer) == buffer


def test_memory_types() -> None:
    assert platforms.memory_type("cpu") == "DRAM"
    assert platforms.memory_type("cuda") == "VRAM"


def test_an_out_of_tree_platform_extends_a_copy_of_the_table() -> None:
    table = platforms.extend(platforms.BUILTIN_TABLE, [Platform("hpu-test", ("cpu",), None, "tcp")])
    platforms.check_buffer_device("hpu-test", "cpu", table)
    assert platforms.derive_buffer_device("hpu-test", table=table) == "cpu"
    with pytest.raises(ValueError, match="unknown device 'hpu-test'"):
        platforms.get_platform("hpu-test")  # the built-in table is untouched
    with pytest.raises(ValueError, match="at least one buffer device"):
        platforms.extend(table, [Platform("empty", (), None, "tcp")])


def test_backend_memory_check() -> None:
    platforms.check_backends(["UCX"], "cpu")
    with pytest.raises(ValueError, match="'POSIX' cannot move VRAM"):
        platforms.check_backends(["POSIX"], "cuda")
    with pytest.raises(ValueError, match="unknown NIXL backend 'NOPE'"):
        platforms.check_backends(["NOPE"], "cpu")


# (backends, buffer device): refused as reaching no other pod. GDS moves DRAM as well as
# VRAM (cuda_gds/gds_backend.h getSupportedMems), so a cpu buffer is refused for the reason
# that matters, not for its memory type.
@pytest.mark.parametrize(
    ("backends", "buffer"),
    [(["GDS"], "cuda"), (["GDS"], "cpu"), (["GDS", "GDS_MT"], "cuda"), (["POSIX"], "cpu")],
)
def test_nixl_v1_4_0_storage_backends_alone_are_refused_as_a_kv_wire(
    backends: list[str], buffer: str
) -> None:
    with pytest.raises(platforms.LocalOnlyBackends) as refused:
        platforms.check_backends(backends, buffer)
    assert str(refused.value).startswith(platforms.LOCAL_ONLY_TEXT)
    assert "use UCX, or add a network backend: GPUNETIO, LIBFABRIC, MOONCAKE, UCCL, UCX" in (
        str(refused.value)
    )


@pytest.mark.parametrize(
    "backends", [["UCX", "GDS"], ["GDS", "UCX"], ["LIBFABRIC"], ["MOONCAKE", "GDS_MT"]]
)
def test_a_list_with_a_network_backend_is_a_kv_wire(backends: list[str]) -> None:
    # NIXL loads only a peer's remote-capable backends (nixl_memory_section.cpp
    # serializeSections), so the network backend carries the KV and GDS stays local
    platforms.check_backends(backends, "cuda")


def test_nixl_v1_4_0_rows_reaching_another_agent() -> None:
    # supportsRemote() true in ucx, libfabric, mooncake, uccl and gpunetio *_backend.h only
    assert platforms.REMOTE_BACKENDS == ("GPUNETIO", "LIBFABRIC", "MOONCAKE", "UCCL", "UCX")
    # NIXL refuses a remote backend without notifications (nixl_agent.cpp createBackend)
    assert all(b.notify for b in platforms.BACKENDS if b.remote)
    assert platforms.reaches_peer(["GDS", "UCX"]) and not platforms.reaches_peer(["GDS"])
    assert not platforms.reaches_peer(["NOPE"])
