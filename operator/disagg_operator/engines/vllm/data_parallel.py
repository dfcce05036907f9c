"""Which data-parallel pools a vLLM version serves for P/D: ``--data-parallel-size N`` in a
pool's args runs N engines behind the pod's one API server, engine d with its own side
channel (the profile's ``data_parallel`` rule), all of them in the pod.

Part of engines.vllm (its checks). Refused: a size that is not a whole number, a version
whose engines the canary cannot reach one by one (0.11.0: no ``X-data-parallel-rank``), the
flags that place ranks beyond the pod, and DP in an instance that spans pods.
"""

from __future__ import annotations

from collections.abc import Iterator

from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import derive


def problems(spec: DeploymentSpec, p: vllm.Profile) -> Iterator[Problem]:
    for role in ROLES:
        yield from _role(spec, role, p)


def _placement(role: str, args: list[str]) -> Iterator[Problem]:
    for i, arg in enumerate(args):
        name = arg.split("=", 1)[0]
        if name in vllm.DATA_PARALLEL_PLACEMENT_FLAGS:
            yield Problem(
                f"spec.{role}.args[{i}]",
                f"{name} places data-parallel ranks beyond the pod or behind another "
                "balancer; the operator runs a pool's DP engines in its pod behind its API "
                f"server: remove it (more pods: spec.{role}.replicas)",
            )


def _role(spec: DeploymentSpec, role: str, p: vllm.Profile) -> Iterator[Problem]:
    r = spec.role(role)
    yield from _placement(role, list(r.args or []))
    found = derive.data_parallel_arg(r)
    if found is None:
        return
    where, given = f"spec.{role}.args[{found[0]}]", found[1]
    if not (given.isdigit() and int(given) > 0):
        yield Problem(
            where,
            f"--data-parallel-size {given!r} is not a whole number above 0; write e.g. "
            "--data-parallel-size 2",
        )
        return
    size = derive.data_parallel_size(r)
    if size > 1 and not p.data_parallel:
        yield Problem(
            where,
            f"--data-parallel-size {size}: vLLM {p.label} has a side channel per TP rank "
            f"and no {vllm.DP_RANK_HEADER} header, so the transfer canary cannot reach each "
            f"engine; use vLLM >= {vllm.first_version('data_parallel')}, or remove it and "
            f"raise spec.{role}.replicas",
        )
    if size > 1 and r.nodes_per_instance > 1:
        yield Problem(
            f"spec.{role}.nodesPerInstance",
            f"{r.nodes_per_instance} with --data-parallel-size {size}: the operator runs "
            "a pool's DP engines in one pod; set 1, or remove --data-parallel-size",
        )
