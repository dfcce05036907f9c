"""What kube-controller-manager's disruption controller makes of a PodDisruptionBudget.

Nothing here runs that controller (no cluster), so this is the edge modelled, from its
source (pkg/controller/disruption/disruption.go, getExpectedPodCount and
getExpectedScale): with ``maxUnavailable`` (or a percentage ``minAvailable``) the expected
pod count is the sum of the ``spec.replicas`` of the pods' distinct controllers, read
through their scale subresource; with an integer ``minAvailable`` it is the number of
selected pods. ``disruptionsAllowed`` = max(0, healthy - desiredHealthy); percentages
round up. A pod whose controller is a DisaggregatedDeployment is scaled by the CRD's
``specReplicasPath``, which this reads from the CRD the project ships.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from tests.operator.builders import ROOT

CRD = ROOT / "crds" / "disagg.dev_disaggregateddeployments.yaml"


def _scaled(value: int | str, total: int) -> int:  # intstr.GetScaledValueFromIntOrPercent(up)
    if isinstance(value, int):
        return value
    return math.ceil(total * int(value.rstrip("%")) / 100)


def _spec_replicas(owner_body: dict[str, Any]) -> int:
    crd = yaml.safe_load(CRD.read_text())
    path = crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"]
    value: Any = owner_body
    for part in path.lstrip(".").split("."):
        value = value[part]
    return int(value)


def disruptions_allowed(
    budget: dict[str, Any], pods: list[dict[str, Any]], owner_body: dict[str, Any]
) -> int:
    """How many of ``pods`` (all healthy) the eviction API lets go under ``budget``;
    ``owner_body`` is the DisaggregatedDeployment the pods' controller reference names."""
    wanted = budget["spec"]["selector"]["matchLabels"].items()
    selected = [p for p in pods if wanted <= p["metadata"]["labels"].items()]
    spec = budget["spec"]
    if "maxUnavailable" in spec or isinstance(spec.get("minAvailable"), str):
        controllers = {
            ref["uid"]
            for p in selected
            for ref in p["metadata"]["ownerReferences"]
            if ref.get("controller")
        }
        expected = _spec_replicas(owner_body) * len(controllers)
        if "maxUnavailable" in spec:
            desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
        else:
            desired = _scaled(spec["minAvailable"], expected)
    else:
        desired = spec["minAvailable"]
    return max(0, len(selected) - desired)
