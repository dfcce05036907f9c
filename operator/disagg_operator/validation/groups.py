"""What is refused of instances that span pods (``spec.<role>.nodesPerInstance``,
``spec.gangScheduling``, ``spec.placement``).

An engine that cannot span pods (or a version of it), ranks that do not divide evenly over
an instance's pods, gang scheduling or group placement with no role that spans pods, a Kueue
LocalQueue missing, Preferred group placement without Kueue (the CEL rules GANG_QUEUE_RULE
and GROUP_PREFERRED_RULE, same words), and names LWS or Kueue cannot take.
"""

from __future__ import annotations

from collections.abc import Iterator

from disagg_operator.api import ROLES, DeploymentSpec, rules
from disagg_operator.api.problems import Problem
from disagg_operator.contracts import lws
from disagg_operator.engines.base import Engine


def problems(spec: DeploymentSpec, engine: Engine, name: str, top: int) -> Iterator[Problem]:
    """``top``: the highest instance index a rollout of any role may use."""
    spanning = [r for r in ROLES if spec.role(r).nodes_per_instance > 1]
    for role in spanning:
        yield from _role(spec, engine, role)
    gang, placement = spec.gang_scheduling, spec.placement
    if not spanning:
        for at, given in (
            ("spec.gangScheduling", gang),
            ("spec.placement.group", placement.group if placement else None),
        ):
            if given is not None:
                yield Problem(
                    at,
                    "applies to instances that span pods, and no role's nodesPerInstance "
                    "is above 1; remove it or set spec.<role>.nodesPerInstance",
                )
    kueue = gang is not None and gang.scheduler == "Kueue"
    if gang is not None and kueue and gang.queue is None:
        yield rules.GANG_QUEUE_RULE.problem()
    longest = max((f"{name}-{r}-{top}" for r in spanning), key=len, default="")
    project, limit, why = (
        ("Kueue", lws.KUEUE_MAX_NAME, f"Kueue {lws.KUEUE_VERSION} names its Workloads after it")
        if kueue
        else ("LWS", lws.LWS_MAX_NAME, f"LWS {lws.MIN_VERSION}'s worker pods carry a label of it")
    )
    if len(longest) > limit:
        yield Problem(
            "metadata.name",
            f"too long for {project}: LeaderWorkerSet {longest!r} exceeds {limit} "
            f"characters ({why}); use a name of at most {limit - len(longest) + len(name)} "
            "characters",
        )
    group = placement.group if placement else None
    if group is not None and group.mode == "Preferred" and not kueue:
        yield rules.GROUP_PREFERRED_RULE.problem()


def _role(spec: DeploymentSpec, engine: Engine, role: str) -> Iterator[Problem]:
    at = f"spec.{role}.nodesPerInstance"
    nodes = spec.role(role).nodes_per_instance
    why = engine.multinode_problem(spec, role)
    if why is not None:
        yield Problem(at, why)
        return
    ranks = engine.instance_ranks(spec, role)
    if ranks % nodes:
        shown = _ranks(spec, role, ranks)
        yield Problem(
            at,
            f"{shown} cannot be spread evenly over {nodes} pods; use a node count that "
            f"divides {ranks}",
        )


def _ranks(spec: DeploymentSpec, role: str, ranks: int) -> str:
    tp = spec.role(role).tensor_parallel_size
    stages = f" x {ranks // tp} pipeline stages" if ranks != tp else ""
    return f"tensorParallelSize {tp}{stages} ({ranks} ranks)"
