"""What a pod needs before its containers start here: the ConfigMaps and Secrets its env
and volumes read (from the API), its volumes written where its containers find them, and
the engine of a prefill or decode pod.

I/O layer (the API through :mod:`.api`, files); the volumes are
:mod:`disagg_tools.local.rules.volumes`' and :func:`.rules.containers.pod_run` turns the
pod into processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from disagg_operator.api import API_VERSION, LABEL_DEPLOYMENT, PLURAL
from disagg_tools.local.engines import LocalEngine
from disagg_tools.local.kubelet.api import Api
from disagg_tools.local.rules import env as kubelet_env
from disagg_tools.local.rules import volumes as volume_rules
from disagg_tools.local.rules.volumes import Volume


async def engine(
    api: Api,
    engines: Mapping[str, LocalEngine],
    body: Mapping[str, Any],
    known: dict[str, LocalEngine | None],
) -> LocalEngine | None:
    """The local-run part of a prefill or decode pod's engine (its DisaggregatedDeployment
    names it), looked up once per deployment (``known``)."""
    meta = body["metadata"]
    owner = (meta.get("labels") or {}).get(LABEL_DEPLOYMENT)
    if owner is None:
        return None
    key = f"{meta.get('namespace', 'default')}/{owner}"
    if key not in known:
        found = await api.get(API_VERSION, PLURAL, meta.get("namespace", "default"), owner)
        kind = ((found or {}).get("spec") or {}).get("engine", {}).get("type")
        known[key] = engines.get(kind) if kind else None
    return known[key]


def write_volumes(volumes: Sequence[Volume], folder: Path, memory: Path) -> None:
    """Write each volume where :func:`~disagg_tools.local.rules.volumes.source` says a pod's
    containers find it: files with their modes under ``folder``, memory emptyDirs under
    ``memory`` (the host's tmpfs for podman pods; their sizeLimit is not enforced); a
    claim's folder is the caller's."""
    for v in volumes:
        if v.kind == "claim":
            continue
        where = Path(volume_rules.source(v, str(folder), str(memory)))
        where.mkdir(parents=True, exist_ok=True)
        for path, (data, mode) in v.files.items():
            f = where / path
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_bytes(data)
            f.chmod(mode)
        where.chmod(0o1777 if v.kind == "tmpfs" else v.mode)


async def data(api: Api, body: Mapping[str, Any]) -> kubelet_env.Data:
    """Every ConfigMap and Secret the pod's env and volumes read, read now."""
    namespace = body["metadata"].get("namespace", "default")
    wanted = {ref for c in body["spec"].get("containers", []) for ref in kubelet_env.references(c)}
    found = []
    for kind, name in sorted(wanted | volume_rules.references(body)):
        got = await api.get("v1", "secrets" if kind == "Secret" else "configmaps", namespace, name)
        if got is not None:
            found.append({**got, "kind": kind})
    return kubelet_env.data_of(found)
