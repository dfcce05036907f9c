"""kubectl (the real client binary) against the emulator, with the operator running."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import yaml

from tests.operator.conftest import NS, ROOT, condition, pods, quickstart, until
from tests.support.emulator import Emulator

# The project's setup installs kubectl into the venv when none is on PATH
# (scripts/install-kubectl.sh): without one these tests fail, they never skip.
KUBECTL = shutil.which(
    "kubectl", path=os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))
)


async def kubectl(kubeconfig: Path, *args: str) -> str:
    """Run kubectl without blocking the emulator's event loop; discovery cache per test (ports
    get reused, and a cache from another emulator on the same port would be stale)."""
    assert KUBECTL, "no kubectl: make test installs one (scripts/install-kubectl.sh)"
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
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
    assert header.split() == ["NAME", "PREFILL", "DECODE", "READY", "REASON", "AGE"]
    assert row.split()[:5] == ["quickstart", "1/1", "1/1", "True", "AllReplicasReady"]
    again = await kubectl(kubeconfig_path, "apply", "-n", NS, "-f", str(example))
    assert "unchanged" in again
    names = await kubectl(kubeconfig_path, "get", "pods", "-n", NS, "-o", "name")
    assert sorted(names.split()) == ["pod/quickstart-decode-0", "pod/quickstart-prefill-0"]


async def test_kubectl_scale_sets_decode_and_prefill_follows(
    emulator: Emulator, kubeconfig_path: Path, operator: asyncio.Task[None], tmp_path: Path
) -> None:
    """`kubectl scale` goes through the CRD's scale subresource (what HPA and KEDA use too):
    decode gets 6 pods, prefill follows perDecode (ratio 0.5: 3 pods), each role gets a
    PodDisruptionBudget keeping all but one of its pods (the one pod per role before and
    after has none: it could refuse no eviction), and the status gives the scale
    subresource its count and selector."""
    body = quickstart("scaled")
    body["spec"]["prefill"] = {
        **{k: v for k, v in body["spec"]["prefill"].items() if k != "replicas"},
        "perDecode": {"ratio": 0.5},
    }
    manifest = tmp_path / "scaled.yaml"
    manifest.write_text(yaml.safe_dump(body))
    await kubectl(kubeconfig_path, "apply", "-f", str(manifest))
    await until(
        "1 + 1 pods",
        lambda: sorted(pods(emulator, "scaled")) == ["scaled-decode-0", "scaled-prefill-0"],
    )
    out = await kubectl(
        kubeconfig_path, "scale", "-n", NS, "disaggregateddeployment/scaled", "--replicas", "6"
    )
    assert "disaggregateddeployment.disagg.dev/scaled scaled" in out
    want = [f"scaled-decode-{i}" for i in range(6)] + [f"scaled-prefill-{i}" for i in range(3)]
    await until("6 decode + 3 prefill pods", lambda: sorted(pods(emulator, "scaled")) == want)
    budgets = {
        b["metadata"]["name"]: (
            b["spec"]["selector"]["matchLabels"]["disagg.dev/role"],
            b["spec"]["minAvailable"],
        )
        for b in emulator.objects_of("policy/v1/poddisruptionbudgets", NS)
    }
    assert budgets == {"scaled-prefill": ("prefill", 2), "scaled-decode": ("decode", 5)}
    for pod in want:
        emulator.set_pod_ready(NS, pod)
    await until("Ready", lambda: condition(emulator, "scaled").get("status") == "True")
    scale = await kubectl(
        kubeconfig_path, "get", "-n", NS, "disagg/scaled", "--subresource=scale", "-o", "json"
    )
    assert json.loads(scale)["status"] == {
        "replicas": 6,
        "selector": "disagg.dev/deployment=scaled,disagg.dev/role=decode",
    }
    await kubectl(kubeconfig_path, "scale", "-n", NS, "disagg/scaled", "--replicas", "1")
    await until(
        "1 + 1 pods again",
        lambda: sorted(pods(emulator, "scaled")) == ["scaled-decode-0", "scaled-prefill-0"],
    )
    await until("no budgets", lambda: not emulator.objects_of("policy/v1/poddisruptionbudgets", NS))


async def test_kubectl_get_shows_a_rollout_in_progress(
    emulator: Emulator, kubeconfig_path: Path, operator: asyncio.Task[None]
) -> None:
    """While a roll waits for a new pod, the printer column says how many are updated."""
    body = quickstart("rolling")
    body["spec"]["decode"].update(replicas=2, rollout={"maxSurge": 1, "maxUnavailable": 0})
    manifest = kubeconfig_path.parent / "rolling.yaml"
    manifest.write_text(yaml.safe_dump(body))
    await kubectl(kubeconfig_path, "apply", "-f", str(manifest))
    for pod in await until(
        "3 pods", lambda: len(pods(emulator, "rolling")) == 3 and pods(emulator, "rolling")
    ):
        emulator.set_pod_ready(NS, pod)
    await until("Ready", lambda: condition(emulator, "rolling").get("status") == "True")
    body["spec"]["decode"]["nodeSelector"] = {"pool": "b"}
    manifest.write_text(yaml.safe_dump(body))
    await kubectl(kubeconfig_path, "apply", "-f", str(manifest))
    await until("a surge pod", lambda: len(pods(emulator, "rolling")) == 4)  # not Ready: it waits
    await until(
        "summary",
        lambda: (
            "(1 updated)"
            in json.dumps(
                emulator.find("disagg.dev/v1alpha1/disaggregateddeployments", NS, "rolling") or {}
            )
        ),
    )
    table = await kubectl(kubeconfig_path, "get", "disagg", "rolling", "-n", NS)
    row = table.splitlines()[1]
    assert "2/2 (1 updated)" in row and "False" in row.split()


async def test_kubectl_get_says_why_a_deployment_is_not_ready(
    emulator: Emulator, kubeconfig_path: Path, operator: asyncio.Task[None]
) -> None:
    """The default columns (priority 0, no -o wide) carry the Ready condition's reason:
    an invalid spec shows InvalidSpec beside READY False."""
    body = quickstart("bad")
    body["spec"]["decode"]["device"] = "quantum"  # admitted, refused by the operator
    manifest = kubeconfig_path.parent / "bad.yaml"
    manifest.write_text(yaml.safe_dump(body))
    await kubectl(kubeconfig_path, "apply", "-f", str(manifest))
    await until("InvalidSpec", lambda: condition(emulator, "bad").get("reason") == "InvalidSpec")
    header, row = (await kubectl(kubeconfig_path, "get", "disagg", "bad", "-n", NS)).splitlines()
    cells = dict(zip(header.split(), row.split(), strict=False))
    assert (cells["NAME"], cells["READY"], cells["REASON"]) == ("bad", "False", "InvalidSpec")
