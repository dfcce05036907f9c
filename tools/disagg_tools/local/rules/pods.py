"""Rendered pods → ``disagg up``'s local processes, through the local kubelet's own rule
(:func:`disagg_tools.local.kubelet.rules.containers.pod_run`): env and ``$(VAR)``, volumes,
loopback, cluster-only ``UCX_TLS`` dropped and the engine's adaptation are the kubelet's,
and every change is listed in :attr:`LocalPod.adapted` so ``disagg up`` can say it.
What ``disagg up`` adds:

- each pod at an address of its own on the loopback network (the caller's ``addresses``);
- the plan is of the engine container, what the run waits for and serves through (the
  kubelet runs every container);
- for engines that take one (``LocalRun.cores``) the CPU binding a node's CPU manager
  would give each pod as an explicit core list (``cores``), so two engines never share a
  core, and free host ports for what an engine binds on every address (``host_ports``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from disagg_operator.api import LABEL_ROLE as ROLE_LABEL
from disagg_operator.api.podtemplate import CANARY_CONTAINER, ENGINE_CONTAINER
from disagg_tools.local.engines import LocalEngine, LocalRun
from disagg_tools.local.kubelet.rules.containers import Place, UpError, pod_run
from disagg_tools.local.rules import env as env_rules
from disagg_tools.local.rules.groups import is_group_worker
from disagg_tools.local.rules.volumes import Volume

LOCAL = "127.0.0.1"
CANARY = CANARY_CONTAINER

__all__ = ["CANARY", "LOCAL", "ROLE_LABEL", "LocalPod", "UpError", "local_pods"]


@dataclass(frozen=True)
class LocalPod:
    """A rendered pod as a local process: argv, env, and what was adapted for one host."""

    name: str
    role: str
    local: LocalRun  # how the engine is waited for and warmed up
    argv: list[str]
    env: dict[str, str]
    dropped: list[str]
    address: str  # the pod's own, where it listens
    http_port: int
    events: str = ""  # where its KV events are read, if it publishes them
    adapted: list[str] = field(default_factory=list)
    serves: bool = True  # False: a group's worker pod (ranks only; nothing to wait for)
    volumes: tuple[Volume, ...] = ()  # to write (under the caller's folder) before it starts


def local_pods(
    objects: list[dict[str, Any]],
    engine: LocalEngine,
    folder: str,
    *,
    addresses: Callable[[str], str],
    host_ports: Iterator[int] | None = None,
    cores: Sequence[Sequence[int]] = (),
    pair: bool = True,
    claims: Mapping[str, str] | None = None,
) -> list[LocalPod]:
    """Rendered objects of a deployment of ``engine`` → one local process per prefill/decode
    pod; pod ``NAME``'s volumes go in ``folder``/``NAME`` (:func:`volume_folder`).

    ``addresses`` gives a pod's address by its name; ``host_ports`` free ports of this
    host for what an engine binds on every address; ``cores[i]`` is the core list of the
    i-th pod (empty: leave the rendered binding alone; only for engines that take one).
    ``pair``: the objects must hold both roles (a P/D deployment). ``claims`` maps a
    PersistentVolumeClaim's name to the local folder standing for it.
    """
    out: list[LocalPod] = []
    data = env_rules.data_of(objects)
    for n, obj in enumerate(role_pods(objects)):
        name, role = obj["metadata"]["name"], obj["metadata"]["labels"][ROLE_LABEL]
        mine = cores[n] if engine.run.cores and n < len(cores) else ()
        where = volume_folder(folder, name)
        place = Place(
            addresses(name), where, f"{where}/memory", claims or {}, cores=mine,
            host_ports=host_ports,
        )  # fmt: skip
        run = pod_run(_engine_only(obj), place, engine, data)
        process = run.engine
        if process is None:
            raise UpError(f"pod {name} has no engine container")
        out.append(
            LocalPod(
                name, role, engine.run, process.argv, process.env, run.dropped, run.address,
                process.port, run.events, run.notes,
                serves=not is_group_worker(obj["metadata"].get("labels", {})),
                volumes=run.volumes,
            )
        )  # fmt: skip
    if pair and not {p.role for p in out} >= {"prefill", "decode"}:
        raise UpError("the manifest renders no prefill and decode pods to run")
    return out


def volume_folder(folder: str, pod: str) -> str:
    """Where ``disagg up`` writes pod ``pod``'s volumes under ``folder``."""
    return f"{folder}/pods/{pod}"


def _engine_only(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with its engine container alone (``disagg up`` runs no sidecar)."""
    containers = pod["spec"]["containers"]
    engine = next((c for c in containers if c["name"] == ENGINE_CONTAINER), containers[0])
    return {**pod, "spec": {**pod["spec"], "containers": [engine]}}


def role_pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rendered prefill and decode pods, in rendered order."""
    roles = ("prefill", "decode")
    return [
        o
        for o in objects
        if o.get("kind") == "Pod"
        and o.get("metadata", {}).get("labels", {}).get(ROLE_LABEL) in roles
    ]


def core_takers(objects: list[dict[str, Any]], engine: LocalEngine) -> int:
    """How many rendered pods get their own cores locally (those of an engine that takes
    an explicit core list)."""
    return len(role_pods(objects)) if engine.run.cores else 0


def share_cores(count: int, available: Sequence[int]) -> list[list[int]]:
    """Split the host's cores into ``count`` disjoint lists, as a node's CPU manager would
    give each pod its own; with fewer cores than engines, cores are reused round-robin
    (and the caller says so).

    vLLM's NIXL worker also pins its progress thread to the highest core of
    each NUMA node, whatever the engine's binding says: on a 2-core host that is the
    decode engine's core (docs/vllm.md has the measured cost)."""
    if count <= 0 or not available:
        return []
    cpus = sorted(available)
    if len(cpus) < count:
        return [[cpus[i % len(cpus)]] for i in range(count)]
    size = len(cpus) // count
    return [cpus[i * size : (i + 1) * size] for i in range(count)]
