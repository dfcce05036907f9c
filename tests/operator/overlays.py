"""A podTemplate that touches every field the overlay merges (tests of render and
validation share it)."""

from __future__ import annotations

from typing import Any

MODELS_PVC = {"name": "models", "persistentVolumeClaim": {"claimName": "models", "readOnly": True}}


def full_template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"example.com/owner": "ml"}},
        "spec": {
            "volumes": [MODELS_PVC, {"name": "extra", "configMap": {"name": "extra"}}],
            "imagePullSecrets": [{"name": "registry"}],
            "serviceAccountName": "model-reader",
            "priorityClassName": "inference",
            "runtimeClassName": "nvidia",
            "securityContext": {"fsGroup": 2000},
            "terminationGracePeriodSeconds": 600,
            "initContainers": [
                {"name": "warm", "image": "busybox:1", "command": ["true"]},
            ],
            "containers": [
                {
                    "name": "engine",
                    "volumeMounts": [
                        {"name": "models", "mountPath": "/mnt/models", "readOnly": True}
                    ],
                    "securityContext": {"capabilities": {"add": ["SYS_PTRACE"], "drop": ["ALL"]}},
                    "livenessProbe": {"httpGet": {"path": "/health", "port": 8000}},
                },
                {
                    "name": "log-shipper",
                    "image": "example.com/shipper:1",
                    "ports": [{"containerPort": 9100}],
                    "volumeMounts": [{"name": "extra", "mountPath": "/etc/extra"}],
                },
            ],
        },
    }
