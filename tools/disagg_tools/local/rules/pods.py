"""Rendered pods → local processes: what changes for a pod's engine to run on this host.

The operator's rendered pods run unchanged except for what only makes sense in a cluster,
and every such change is listed in :attr:`LocalPod.adapted` so ``disagg up`` can say it:

- each pod at an address of its own on the loopback network (the caller's
  ``addresses``), where its engine listens with its rendered ports, as in a pod; only the
  engine runs, so ``127.0.0.1`` in its command and env stays this host (a collector, say);
- env and ``$(VAR)`` as the kubelet makes them (:mod:`disagg_tools.local.rules.env`);
- cluster-only ``UCX_TLS`` is dropped, so UCX picks local transports (shared memory, CMA);
- a decode pod's ``transfer-canary`` container keeps its arguments (``canary``); ``disagg
  up`` runs it once with the local prefill and decode URLs in place of the Service's;
- the engine's own adaptation (its local-run module's
  :meth:`~disagg_tools.local.engines.base.LocalEngine.process`): the handshake Secret as a
  private temp file, ``vllm serve MODEL`` as ``python -m`` its API server, and for engines
  that take one (``LocalRun.cores``) the CPU binding a node's CPU manager would give each
  pod as an explicit core list (``cores``), so two engines never share a core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from disagg_operator.api import LABEL_ROLE as ROLE_LABEL
from disagg_operator.api.podtemplate import CANARY_CONTAINER, ENGINE_CONTAINER
from disagg_tools.local.engines import LocalEngine, LocalRun
from disagg_tools.local.engines.base import disagg_argv, without_flag
from disagg_tools.local.rules import env as env_rules
from disagg_tools.local.rules.groups import is_group_worker

LOCAL = "127.0.0.1"
CLUSTER_ONLY = ("UCX_TLS", "DISAGG_UCX_TLS")
NODE = "local"  # spec.nodeName of every pod a local process runs
CANARY = CANARY_CONTAINER


class UpError(RuntimeError):
    """Something stops the local run; the message says what and what to do."""


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
    canary: list[str] = field(default_factory=list)  # the canary container's args, if any
    serves: bool = True  # False: a group's worker pod (ranks only; nothing to wait for)


def local_pods(
    objects: list[dict[str, Any]],
    secret_path: str,
    engine: LocalEngine,
    *,
    addresses: Callable[[str], str],
    host_ports: Iterator[int] | None = None,
    cores: Sequence[Sequence[int]] = (),
    pair: bool = True,
    claims: Mapping[str, str] | None = None,
    config_maps: Mapping[str, str] | None = None,
) -> list[LocalPod]:
    """Rendered objects of a deployment of ``engine`` → one local process per prefill/decode
    pod.

    ``addresses`` gives a pod's address by its name; ``host_ports`` free ports of this
    host for what an engine binds on every address; ``cores[i]`` is the core list of the
    i-th pod (empty: leave the rendered binding alone; only for engines that take one).
    ``pair``: the objects must hold both roles (a P/D deployment). ``claims`` maps a
    PersistentVolumeClaim's name to the local folder standing for it: the engine's paths
    under the claim's mount point become paths in that folder (a ``pvc://`` model).
    ``config_maps`` maps a rendered ConfigMap's name to the folder its data was written
    to, the same way (args and env values).
    """
    out: list[LocalPod] = []
    data = env_rules.data_of(objects)
    for n, obj in enumerate(_pods(objects)):
        name, role = obj["metadata"]["name"], obj["metadata"]["labels"][ROLE_LABEL]
        container = _engine_container(obj)
        address = addresses(name)
        fields = env_rules.PodFields(obj, address, address, NODE)
        try:
            env = env_rules.container_env(f"pod {name}", container, fields, data)
        except env_rules.EnvError as e:
            raise UpError(str(e)) from None
        command = env_rules.container_command(container, env)
        env, dropped = without_cluster_only(env)
        paths, mounted = _mount_paths(obj, container, claims or {}, config_maps or {})
        command = [_host_path(arg, paths) for arg in command]
        env = {k: _host_path(v, paths) for k, v in env.items()}
        mine = cores[n] if engine.run.cores and n < len(cores) else ()
        try:
            process = engine.process(
                name, command, env, secret_path=secret_path, address=address, cores=mine,
                host_ports=host_ports,
            )  # fmt: skip
        except (NotImplementedError, ValueError) as e:
            raise UpError(str(e)) from None
        out.append(
            LocalPod(
                name,
                role,
                engine.run,
                process.argv,
                process.env,
                dropped,
                address,
                process.http_port,
                process.events,
                [*mounted, *process.adapted],
                _canary_args(obj),
                serves=not is_group_worker(obj["metadata"].get("labels", {})),
            )
        )
    if pair and not {p.role for p in out} >= {"prefill", "decode"}:
        raise UpError("the manifest renders no prefill and decode pods to run")
    return out


def _mount_paths(
    pod: dict[str, Any],
    container: dict[str, Any],
    claims: Mapping[str, str],
    config_maps: Mapping[str, str],
) -> tuple[dict[str, str], list[str]]:
    """The engine's claim and ConfigMap mounts as (mount path → local folder), and what
    was adapted. A model the cluster fetches (an init container, an image volume) cannot
    run here."""
    name = pod["metadata"]["name"]
    volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
    fetch = [c["name"] for c in pod["spec"].get("initContainers", [])]
    if fetch:
        raise UpError(
            f"pod {name} fetches its model with init container(s) {', '.join(fetch)}, "
            "which disagg up does not run; give a local model with --model DIR"
        )
    paths, notes = {}, []
    for mount in container.get("volumeMounts", []):
        volume, at = volumes.get(mount["name"], {}), mount["mountPath"]
        if "image" in volume:
            raise UpError(
                f"pod {name} mounts image {volume['image']['reference']} at {at}; "
                "disagg up has no image volumes: give a local model with --model DIR"
            )
        config_map = volume.get("configMap", {}).get("name")
        if config_map is not None:
            if config_map not in config_maps:
                raise UpError(f"pod {name} mounts ConfigMap {config_map!r}, which was not written")
            paths[at] = config_maps[config_map]
            notes.append(f"ConfigMap {config_map} (mounted at {at}) → {config_maps[config_map]}")
            continue
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim is None:
            continue
        if claim not in claims:
            raise UpError(
                f"pod {name} mounts claim {claim!r} at {at}; give the local folder that "
                f"stands for it: --claim {claim}=DIR"
            )
        paths[at] = claims[claim]
        notes.append(f"claim {claim} (mounted at {at}) → {claims[claim]}")
    return paths, notes


def _host_path(arg: str, paths: Mapping[str, str]) -> str:
    for at, local in paths.items():
        if arg == at or arg.startswith(at + "/"):
            return local + arg[len(at) :]
    return arg


def _pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = ("prefill", "decode")
    return [
        o
        for o in objects
        if o.get("kind") == "Pod"
        and o.get("metadata", {}).get("labels", {}).get(ROLE_LABEL) in roles
    ]


def _canary_args(pod: dict[str, Any]) -> list[str]:
    found = [c for c in pod["spec"]["containers"] if c["name"] == CANARY]
    return list(found[0].get("args", [])) if found else []


def canary_argv(pod: LocalPod, prefill_url: str, decode_url: str) -> list[str]:
    """The pod's canary, run once against the local processes (empty: it has none); no
    wire check: `disagg up` runs the engines, not the prefill pods' wire peers."""
    if not pod.canary:
        return []
    args = without_flag(without_flag(pod.canary, "--prefill"), "--decode")
    args = without_flag(args, "--wire-peer-port")
    args = [*args, "--prefill", prefill_url, "--decode", decode_url, "--once"]
    return disagg_argv(["worker", "canary", *args])


def _engine_container(pod: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod["spec"]["containers"]
    return next((c for c in containers if c["name"] == ENGINE_CONTAINER), containers[0])


def without_cluster_only(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``env`` without the cluster-only variables, and those dropped as ``NAME=value``."""
    kept = {k: v for k, v in env.items() if k not in CLUSTER_ONLY}
    return kept, [f"{k}={v}" for k, v in env.items() if k in CLUSTER_ONLY]


def core_takers(objects: list[dict[str, Any]], engine: LocalEngine) -> int:
    """How many rendered pods get their own cores locally (those of an engine that takes
    an explicit core list)."""
    return len(_pods(objects)) if engine.run.cores else 0


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
