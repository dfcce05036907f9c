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
    with pytest.raises(ValueError, match="'GDS' cannot move DRAM"):
        platforms.check_backends(["GDS"], "cpu")
    with pytest.raises(ValueError, match="unknown NIXL backend 'NOPE'"):
        platforms.check_backends(["NOPE"], "cpu")
