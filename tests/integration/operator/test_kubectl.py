"""kubectl (the real client binary) against the emulator, with the operator running."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.integration.emulator import Emulator
from tests.integration.operator.conftest import NS, ROOT, condition, pods, until

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """Run kubectl without blocking the emulator's event loop; discovery cache per test (ports
    get reused, and a cache from another emulator on the same port would be stale)."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        "--cache-dir",
        str(kubeconfig.parent / "kube-cache"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "KUBECTL_KUBERC": "false"},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


async def test_kubectl_apply_and_get(
    emulator: Emulator, kubeconfig_path: Path, operator: asyncio.Task[None]
) -> None:
    example = ROOT / "examples" / "quickstart-cpu.yaml"
    out = await kubectl(kubeconfig_path, "apply", "-n", NS, "-f", str(example))
    assert "disaggregateddeployment.disagg.dev/quickstart created" in out
    for pod in await until(
        "pods", lambda: len(pods(emulator, "quickstart")) == 2 and pods(emulator, "quickstart")
    ):
        emulator.set_pod_ready(NS, pod)
    await until("Ready", lambda: condition(emulator, "quickstart").get("status") == "True")
    table = await kubectl(kubeconfig_path, "get", "disagg", "-n", NS)
    header, row = table.splitlines()
    assert header.split() == ["NAME", "PREFILL", "DECODE", "READY", "AGE"]
    assert row.split()[:4] == ["quickstart", "1/1", "1/1", "True"]
    again = await kubectl(kubeconfig_path, "apply", "-n", NS, "-f", str(example))
    assert "unchanged" in again
    names = await kubectl(kubeconfig_path, "get", "pods", "-n", NS, "-o", "name")
    assert sorted(names.split()) == ["pod/quickstart-decode-0", "pod/quickstart-prefill-0"]
