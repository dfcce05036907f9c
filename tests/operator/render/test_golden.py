"""Every example, and variants that reach each branch of render, renders byte for byte
as recorded in ``golden/``: a change of the rendered objects is always deliberate.

The recorded files are `disagg render` output. When a change is meant to alter what the
operator renders, regenerate them and review the diff as part of the change::

    DISAGG_UPDATE_GOLDEN=1 .venv/bin/pytest tests/operator/render/test_golden.py

A refactor must leave them untouched.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator import cli
from disagg_tools.emulator.rules.ops import merge_patch
from tests.operator.builders import ROOT

GOLDEN = Path(__file__).with_name("golden")
CANARY = "registry.example/disagg-worker-cpu:0.1.0"
HPU = """\
- name: hpu
  bufferDevices: [hpu, cpu]
  acceleratorResource: habana.ai/gaudi
  ucxTls: tcp,self
  engineDevice: hpu
"""


# name → (example, overlay of its body, extra `disagg render` flags)
VARIANTS: dict[str, tuple[str, dict[str, Any], tuple[str, ...]]] = {
    "vllm-0.11.0-tp": (
        "llm-d.yaml",
        {
            "spec": {
                "engine": {"version": "0.11.0"},
                "prefill": {
                    "tensorParallelSize": 2,
                    "resources": {"limits": {"nvidia.com/gpu": 2}},
                },
                "decode": {
                    "tensorParallelSize": 4,
                    "resources": {"limits": {"nvidia.com/gpu": 4}},
                },
                "llmd": {
                    "inferencePool": {
                        "extensionRef": {"name": "picker", "port": 9100, "failureMode": "FailOpen"},
                    },
                    "routingSidecar": {"args": ["--enable-tls=prefiller"]},
                },
            }
        },
        (),
    ),
    "vllm-0.17.0-cpu": (
        "vllm-cpu.yaml",
        {
            "spec": {
                "engine": {"version": "0.17.0"},
                "kvTransfer": {
                    "kvLoadFailurePolicy": "recompute",
                    "kvConnectorExtraConfig": {"num_threads": 4},
                    "ucxTls": "tcp,self",
                    "blockLeaseSeconds": 40,
                    "transferDeadlineSeconds": 12,
                    "sideChannelPort": 6000,
                },
                "decode": {"env": [{"name": "FOO", "value": "bar"}]},
            }
        },
        (),
    ),
    "vllm-0.20.0-hetero": (
        "heterogeneous-gpu-cpu.yaml",
        {"spec": {"engine": {"version": "0.20.0"}, "kvTransfer": {"blockLeaseSeconds": 45.5}}},
        ("--canary-image", CANARY),
    ),
    "reference-scaled": (
        "quickstart-cpu.yaml",
        {
            "spec": {
                "prefill": {
                    "replicas": None,
                    "perDecode": {"ratio": 0.5, "min": 1, "max": 4},
                    "disruptionBudget": {"maxUnavailable": 0},
                    "nodeSelector": {"pool": "cpu"},
                    "tolerations": [{"key": "pool", "operator": "Exists"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {"matchExpressions": [{"key": "x", "operator": "Exists"}]}
                                ]
                            }
                        }
                    },
                },
                "decode": {
                    "replicas": 3,
                    "topologySpreadConstraints": [],
                    "rollout": {"maxSurge": 2, "maxUnavailable": 0},
                    "env": [{"name": "EXTRA", "value": "1"}],
                },
                "kvTransfer": {"transferDeadlineSeconds": 4.5, "blockLeaseSeconds": 9},
            }
        },
        (),
    ),
    "reference-no-canary": (
        "quickstart-cpu.yaml",
        {"spec": {"transferCanary": {"enabled": False}, "decode": {"image": "example/own:2"}}},
        (),
    ),
    "reference-push": (
        "quickstart-cpu.yaml",
        {"spec": {"kvTransfer": {"mode": "push"}}},
        (),
    ),
    "reference-canary-image": (
        "quickstart-cpu.yaml",
        {"spec": {"transferCanary": {"image": "example/canary:3"}}},
        (),
    ),
    "vllm-hpu-platform": (
        "heterogeneous-gpu-cpu.yaml",
        {
            "spec": {
                "prefill": {
                    "device": "hpu",
                    "kvBufferDevice": None,
                    "resources": {"limits": {"nvidia.com/gpu": None, "habana.ai/gaudi": 1}},
                },
            }
        },
        ("--platforms-file", "{hpu}", "--canary-image", CANARY),
    ),
}


def _cases() -> list[tuple[str, str, dict[str, Any] | None, tuple[str, ...]]]:
    cases: list[tuple[str, str, dict[str, Any] | None, tuple[str, ...]]] = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        kinds = {d.get("kind") for d in yaml.safe_load_all(path.read_text()) if d}
        if "DisaggregatedDeployment" not in kinds:
            continue
        rel = path.relative_to(ROOT / "examples").with_suffix("")
        name = str(rel).replace("/", "-")
        cases.append((name, str(rel) + ".yaml", None, ()))
        cases.append((f"{name}+canary-image", str(rel) + ".yaml", None, ("--canary-image", CANARY)))
    cases += [(name, ex, overlay, flags) for name, (ex, overlay, flags) in VARIANTS.items()]
    return cases


def _render(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    example: str,
    overlay: dict[str, Any] | None,
    flags: tuple[str, ...],
) -> str:
    manifest = ROOT / "examples" / example
    if overlay is not None:
        body = merge_patch(yaml.safe_load(manifest.read_text()), overlay)  # None removes a key
        manifest = tmp_path / "manifest.yaml"
        manifest.write_text(yaml.safe_dump(body))
    hpu = tmp_path / "platforms.yaml"
    hpu.write_text(HPU)
    argv = ["render", "-f", str(manifest), *(f.replace("{hpu}", str(hpu)) for f in flags)]
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return out


@pytest.mark.parametrize(
    ("name", "example", "overlay", "flags"), _cases(), ids=[c[0] for c in _cases()]
)
def test_renders_as_recorded(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    example: str,
    overlay: dict[str, Any] | None,
    flags: tuple[str, ...],
) -> None:
    out = _render(tmp_path, capsys, example, overlay, flags)
    recorded = GOLDEN / f"{name}.yaml"
    if os.environ.get("DISAGG_UPDATE_GOLDEN"):
        recorded.write_text(out)
    assert recorded.exists(), f"no recording: DISAGG_UPDATE_GOLDEN=1 to write {recorded}"
    assert out == recorded.read_text(), f"{name} renders differently from {recorded}"


def test_every_recording_has_a_case() -> None:
    names = {name for name, *_ in _cases()}
    assert {p.stem for p in GOLDEN.glob("*.yaml")} == names
