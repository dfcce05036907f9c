"""Platforms file loader: a good document gives Platform objects; each bad one names its field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_contract import platform_file
from disagg_contract.platform_file import PlatformFileError
from disagg_contract.platforms import Platform

HPU = {
    "name": "hpu",
    "bufferDevices": ["hpu", "cpu"],
    "acceleratorResource": "habana.ai/gaudi",
    "ucxTls": "rc,tcp,self",
    "backends": ["UCX"],
}


def _entry(**changes: Any) -> dict[str, Any]:
    entry = {**HPU, **changes}
    return {k: v for k, v in entry.items() if v is not None}


def _problems(doc: Any) -> list[str]:
    with pytest.raises(PlatformFileError) as e:
        platform_file.from_document(doc)
    return [str(p) for p in e.value.problems]


def test_good_yaml_document() -> None:
    text = """
- name: hpu
  bufferDevices: [hpu, cpu]
  acceleratorResource: habana.ai/gaudi
  ucxTls: rc,tcp,self
  backends: [UCX]
- name: cuda
  overrides: true
  bufferDevices: [cuda, cpu]
  acceleratorResource: nvidia.com/gpu
"""
    hpu, cuda = platform_file.parse(text)
    assert hpu == Platform(
        "hpu",
        ("hpu", "cpu"),
        "habana.ai/gaudi",
        "rc,tcp,self",
        ("UCX",),
        note="declared in the platforms file",
    )
    assert hpu.native_buffer == "hpu" and hpu.vllm_device == "hpu"
    assert cuda.ucx_tls == platform_file.DEFAULT_UCX_TLS and cuda.backends == ()


def test_json_and_minimal_entries() -> None:
    (p,) = platform_file.parse(json.dumps([{"name": "npu", "bufferDevices": ["cpu"]}]))
    assert p.accelerator_resource is None and p.buffer_devices == ("cpu",)


def test_engine_device_names_vllms_row() -> None:
    (p,) = platform_file.from_document([_entry(name="rocm-mi300", engineDevice="cuda")])
    assert p.vllm_device == "cuda"


@pytest.mark.parametrize("text", ["", "[]", "# nothing yet\n"])
def test_empty_documents_declare_nothing(text: str) -> None:
    assert platform_file.parse(text) == []


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"name": "hpu"}, "platforms: must be a list of platforms, got dict"),
        (["hpu"], "platforms[0]: must be a mapping with name, bufferDevices"),
        ([_entry(colour="red")], "platforms[0].colour: unknown key; known keys: name,"),
        ([_entry(name=None)], "platforms[0].name: required"),
        ([_entry(name="Gaudi 2")], "platforms[0].name: 'Gaudi 2' is not a device name"),
        ([_entry(name="cuda")], "platforms[0].name: 'cuda' is a built-in platform; set overrides"),
        ([_entry(overrides=True)], "platforms[0].overrides: 'hpu' is not a built-in platform"),
        ([_entry(overrides="yes")], "platforms[0].overrides: 'yes' must be true or false"),
        ([_entry(bufferDevices=None)], "platforms[0].bufferDevices: required"),
        ([_entry(bufferDevices=[])], "platforms[0].bufferDevices: must be a non-empty list"),
        ([_entry(bufferDevices="hpu")], "platforms[0].bufferDevices: must be a non-empty list"),
        ([_entry(bufferDevices=["hpu", "hpu"])], "platforms[0].bufferDevices: lists a value twice"),
        ([_entry(bufferDevices=[3])], "platforms[0].bufferDevices: 3 is not a valid entry"),
        (
            [_entry(acceleratorResource="gaudi")],
            "platforms[0].acceleratorResource: 'gaudi' is not an extended resource name",
        ),
        (
            [_entry(acceleratorResource="kubernetes.io/gpu")],
            "platforms[0].acceleratorResource: 'kubernetes.io/gpu' is not an extended",
        ),
        ([_entry(ucxTls="tcp;self")], "platforms[0].ucxTls: 'tcp;self' is not a comma-separated"),
        (
            [_entry(ucxTls="tcp,cma,self")],
            "platforms[0].ucxTls: transports cma need CAP_SYS_PTRACE",
        ),
        ([_entry(backends=[])], "platforms[0].backends: must be a non-empty list"),
        ([_entry(backends=["NOPE"])], "platforms[0].backends: unknown NIXL backend 'NOPE'"),
        (  # storage I/O only: no pool of this platform could move KV between pods
            [_entry(backends=["GDS", "POSIX"])],
            "platforms[0].backends: lists no NIXL backend that can reach another pod",
        ),
        ([_entry(engineDevice="CUDA")], "platforms[0].engineDevice: 'CUDA' is not a device type"),
        ([HPU, HPU], "platforms[1].name: 'hpu' is declared twice"),
    ],
)
def test_bad_documents_name_the_field(doc: Any, expected: str) -> None:
    problems = _problems(doc)
    assert any(p.startswith(expected) for p in problems), problems


def test_every_problem_is_reported_at_once() -> None:
    problems = _problems([_entry(name="cuda", bufferDevices=[], backends=["NOPE"])])
    assert [p.split(":")[0] for p in problems] == [
        "platforms[0].name",
        "platforms[0].bufferDevices",
        "platforms[0].backends",
    ]


def test_yaml_syntax_error() -> None:
    with pytest.raises(PlatformFileError) as e:
        platform_file.parse("- name: [hpu")
    assert str(e.value).startswith("platforms: not YAML or JSON")


def test_a_network_backend_beside_a_storage_one_is_accepted() -> None:
    """As in a deployment's list: NIXL puts only the remote-capable backends in the
    metadata a peer loads, so UCX carries the KV and GDS stays local."""
    (platform,) = platform_file.from_document([_entry(backends=["UCX", "GDS"])])
    assert platform.backends == ("UCX", "GDS")
