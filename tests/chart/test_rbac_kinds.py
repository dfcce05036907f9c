"""The chart's RBAC for the operator's kinds is the table of kinds (disagg_operator.api.kinds):
each child kind, the Events and the Lease get exactly the verbs the table says, in each
API group of its versions, and nothing else of theirs. (test_rbac_minimal.py proves the
same grants are what the real operator calls.)"""

from __future__ import annotations

from typing import Any

from disagg_operator.api import kinds
from tests.chart.chartkit import grants

ALL_POOLS = {
    "llmd": {"enabled": True, "inferencePoolVersions": ["v1"]},
    "monitoring": {"enabled": True},
}


def _granted(render: Any, values: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for _, group, resource, verb in grants(render(values), "disagg"):
        out.setdefault((group, resource), set()).add(verb)
    return out


def test_every_child_kind_gets_the_verbs_of_its_row(render: Any) -> None:
    granted = _granted(render, ALL_POOLS)
    group, resource, verb = kinds.PROFILE_READ  # with monitoring: the autoscaler's read
    granted[(group, resource)].remove(verb)
    for kind in (*kinds.CHILDREN, kinds.EVENT, kinds.LEASE):
        for group in kind.groups:
            assert granted.pop((group, kind.plural)) == set(kind.verbs), kind.kind
    for group, resource, verbs in kinds.DELEGATED:  # held to be granted to the router
        assert granted.pop((group, resource)) == set(verbs), resource
    # what remains is the custom resource and its status and kopf's cluster-scoped reads:
    # no other kind is granted
    assert set(granted) == {
        ("disagg.dev", "disaggregateddeployments"),
        ("disagg.dev", "disaggregateddeployments/status"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
    }


def test_without_leader_election_no_lease_is_granted(render: Any) -> None:
    granted = _granted(render, {"replicaCount": 1, "leaderElection": {"enabled": False}})
    assert (kinds.LEASE.groups[0], kinds.LEASE.plural) not in granted
