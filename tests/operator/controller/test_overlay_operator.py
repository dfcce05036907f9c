"""The real kopf operator on the API emulator: a role's podTemplate reaches its pods, a
change of it rolls them, and an overlay that would break a derived setting changes nothing."""

from __future__ import annotations

import asyncio
import copy

from tests.operator.conftest import DD_PATH, api, condition, pods, quickstart, until
from tests.operator.overlays import MODELS_PVC
from tests.support.emulator import Emulator, writes

TEMPLATE = {
    "spec": {
        "volumes": [MODELS_PVC],
        "imagePullSecrets": [{"name": "registry"}],
        "serviceAccountName": "model-reader",
        "containers": [
            {"name": "engine", "volumeMounts": [{"name": "models", "mountPath": "/mnt/models"}]}
        ],
    }
}


async def test_a_pod_template_reaches_the_pods_and_its_change_rolls_them(
    emulator: Emulator, operator: asyncio.Task[None]
) -> None:
    body = quickstart()
    body["spec"]["decode"]["podTemplate"] = copy.deepcopy(TEMPLATE)
    await api(emulator, "POST", DD_PATH, body)
    got = await until("both pods", lambda: len(pods(emulator)) == 2 and pods(emulator))
    decode, prefill = got["demo-decode-0"]["spec"], got["demo-prefill-0"]["spec"]
    assert decode["serviceAccountName"] == "model-reader"
    assert decode["imagePullSecrets"] == [{"name": "registry"}]
    assert MODELS_PVC in decode["volumes"]
    engine = next(c for c in decode["containers"] if c["name"] == "engine")
    assert {"name": "models", "mountPath": "/mnt/models"} in engine["volumeMounts"]
    assert "serviceAccountName" not in prefill
    old = got["demo-decode-0"]["metadata"]["labels"]["disagg.dev/revision"]

    # an overlay that would replace the engine's image: refused, nothing touched
    mark = len(emulator.calls)
    bad = {
        "spec": {
            "decode": {
                "podTemplate": {"spec": {"containers": [{"name": "engine", "image": "x:2"}]}}
            }
        }
    }
    await api(emulator, "PATCH", f"{DD_PATH}/demo", bad)
    ready = await until(
        "InvalidSpec",
        lambda: (
            condition(emulator, "demo").get("reason") == "InvalidSpec"
            and condition(emulator, "demo")
        ),
    )
    assert "spec.decode.podTemplate.spec.containers[0].image" in ready["message"]
    assert {c.resource for c in writes(emulator, mark)} <= {"disaggregateddeployments", "events"}

    # a valid change rolls the decode pod: its replacement has the new label
    fixed = {
        "spec": {
            "decode": {
                "podTemplate": {"metadata": {"labels": {"team": "ml"}}, "spec": TEMPLATE["spec"]}
            }
        }
    }
    await api(emulator, "PATCH", f"{DD_PATH}/demo", fixed)

    def rolled() -> dict | None:
        for pod in pods(emulator).values():
            labels = pod["metadata"]["labels"]
            if labels.get("disagg.dev/role") == "decode" and labels.get("team") == "ml":
                return pod
        return None

    new = await until("a rolled decode pod", rolled)
    assert new["metadata"]["labels"]["disagg.dev/revision"] != old
