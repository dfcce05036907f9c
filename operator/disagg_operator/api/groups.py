"""Instances that span pods: gang scheduling and placement (docs/multinode.md).

Part of :mod:`disagg_operator.api`. A role whose ``nodesPerInstance`` is above
1 runs each instance as a LeaderWorkerSet group (:mod:`disagg_operator.render.groups`);
``spec.gangScheduling`` names the scheduler that places a group whole, ``spec.placement``
packs a group into one topology domain and keeps prefill near decode.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from disagg_operator.api.base import _Model, _rules
from disagg_operator.api.rules import GANG_QUEUE_RULE


class GangScheduling(_Model):
    """Who places a group's pods all at once (or none of them): Volcano through
    LeaderWorkerSet's scheduler provider (one PodGroup per group), or Kueue (one Workload
    per group, admitted whole)."""

    model_config = ConfigDict(json_schema_extra=_rules(GANG_QUEUE_RULE))

    scheduler: Literal["Volcano", "Kueue"] = Field(
        description="Volcano (the LWS controller must run with gangSchedulingManagement."
        "schedulerProvider: volcano; the pods name the volcano scheduler) or Kueue (its "
        "leaderworkerset integration)",
    )
    queue: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="Kueue: the LocalQueue of the deployment's namespace (required); "
        "Volcano: the Queue (omitted: Volcano's default queue)",
    )


class Topology(_Model):
    """A topology domain: the node label whose equal values make one (a rack, a zone, an
    NVLink domain), and whether landing in one is required or only preferred."""

    topology_key: str = Field(
        min_length=1,
        max_length=316,
        description="the node label, e.g. topology.kubernetes.io/zone or nvidia.com/gpu.clique",
    )
    mode: Literal["Required", "Preferred"] = Field(
        default="Required",
        description="Required: never placed outside one domain; Preferred: the scheduler "
        "tries (with a group's pods: Kueue's topology-aware scheduling only)",
    )


class Placement(_Model):
    """Where instances land relative to the topology and to each other."""

    group: Topology | None = Field(
        default=None,
        description="every pod of one multi-pod instance in one domain: Kueue's "
        "topology-aware scheduling with spec.gangScheduling.scheduler Kueue, else "
        "LeaderWorkerSet's exclusive topology (Required only: one group per domain)",
    )
    prefill_near_decode: Topology | None = Field(
        default=None,
        description="each prefill pod (a group's leader and workers) in a domain that holds "
        "a decode pod of this deployment: the KV travels within it (pod affinity)",
    )
