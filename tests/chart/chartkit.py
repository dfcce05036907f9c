"""Helpers for the Helm chart tests: render the chart with the real Helm engine, parse it.

helm-python-sdk embeds Helm itself (no binary, no cluster): :func:`render_files` returns the
manifests Helm would send at install time; :func:`parse` turns them into objects. Shared by
the chart tests here (rendering, install, RBAC).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "disagg"
RELEASE = "disagg"
NAMESPACE = "disagg-system"

# Non-default values touching every key, used wherever "default and non-default" matters.
FULL_VALUES: dict[str, Any] = {
    "image": {
        "repository": "registry.example/disagg-operator",
        "tag": "v9",
        "pullPolicy": "Always",
    },
    "imagePullSecrets": [{"name": "regcred"}],
    "fullnameOverride": "dd-op",
    "replicaCount": 3,
    "leaderElection": {
        "enabled": True,
        "leaseDurationSeconds": 15,
        "renewDeadlineSeconds": 10,
        "retryPeriodSeconds": 2.5,
    },
    "watchNamespaces": ["team-a", "team-b"],
    "logLevel": "debug",
    "serviceAccount": {"create": True, "name": "dd-sa", "annotations": {"a": "b"}},
    "rootKey": {"existingSecret": "my-root-key", "existingSecretKey": "key"},
    "llmd": {"enabled": True},
    "monitoring": {"enabled": True},
    "autoscaling": {"prometheusUrl": "http://prometheus-operated.monitoring:9090"},
    "health": {"port": 8181},
    "metrics": {
        "port": 9191,
        "service": {"enabled": True, "port": 9292, "annotations": {"x": "y"}},
        "serviceMonitor": {
            "enabled": True,
            "interval": "15s",
            "scrapeTimeout": "5s",
            "labels": {"release": "prom"},
        },
    },
    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "1Gi"}},
    "nodeSelector": {"pool": "system"},
    "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "arch", "operator": "In", "values": ["amd64"]}]}
                ]
            }
        }
    },
    "priorityClassName": "system-cluster-critical",
    "podAnnotations": {"note": "x"},
    "podLabels": {"team": "ml"},
    "transferCanary": {"image": "registry.example/disagg-worker-cpu:v9"},
    "platforms": [
        {
            "name": "hpu",
            "bufferDevices": ["hpu", "cpu"],
            "acceleratorResource": "habana.ai/gaudi",
            "ucxTls": "tcp,self",
            "backends": ["UCX"],
            "engineDevice": "hpu",
            "overrides": False,
        }
    ],
    "extraArgs": ["--log-level=error"],
}

VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "namespaced": {"watchNamespaces": ["team-a"]},
    "llmd": {"llmd": {"enabled": True}},
    "full": FULL_VALUES,
}


def render_files(chart: Any, values: dict[str, Any] | None = None) -> dict[str, str]:
    """Template path → rendered text, as ``helm template`` with an install would produce."""
    out: dict[str, str] = chart.render(
        values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True
    )
    return out


def parse(files: dict[str, str]) -> list[dict[str, Any]]:
    """Every Kubernetes object in the rendered manifests (NOTES.txt excluded)."""
    objs: list[dict[str, Any]] = []
    for path, text in sorted(files.items()):
        if path.endswith("NOTES.txt"):
            continue
        objs += [d for d in yaml.safe_load_all(text) if d]
    return objs


def load() -> Any:
    return helm_python.Chart.load(CHART)


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[o['metadata']['name'] for o in found]}"
    return found[0]


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["kind"] for o in objs)


# (namespace, apiGroup, resource[/subresource], verb); namespace "" = granted cluster-wide.
Grant = tuple[str, str, str, str]


def grants(objs: list[dict[str, Any]], service_account: str) -> set[Grant]:
    """Every permission the rendered RBAC gives ``service_account``, rule by rule expanded.

    A RoleBinding grants its Role's rules in the binding's namespace; a ClusterRoleBinding
    grants its ClusterRole's rules in every namespace and on cluster-scoped resources.
    """
    roles = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o.get("rules", [])
        for o in objs
        if o["kind"] in {"Role", "ClusterRole"}
    }
    out: set[Grant] = set()
    for binding in objs:
        if binding["kind"] not in {"RoleBinding", "ClusterRoleBinding"}:
            continue
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == service_account
            for s in binding["subjects"]
        ):
            continue
        where = binding["metadata"].get("namespace", "")
        ref = binding["roleRef"]
        role_ns = where if ref["kind"] == "Role" else ""
        for rule in roles[(ref["kind"], role_ns, ref["name"])]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        out.add((where, group, resource, verb))
    return out
