"""What a pod needs from the API before its containers start here: its Secret, ConfigMap
and emptyDir volumes as folders, the Secret and ConfigMap keys its env names, and the
engine of a prefill or decode pod.

I/O layer (the API through :mod:`.api`, files); :func:`.rules.containers.pod_run` turns
them into processes.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from disagg_operator.api import API_VERSION, HMAC_KEY, LABEL_DEPLOYMENT, PLURAL
from disagg_tools.local.engines import LocalEngine
from disagg_tools.local.kubelet.api import Api
from disagg_tools.local.rules import env as kubelet_env


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


async def volumes(api: Api, body: Mapping[str, Any], folder: Path) -> tuple[dict[str, str], str]:
    """Secret, ConfigMap and emptyDir volumes as folders; the handshake key's file."""
    namespace = body["metadata"].get("namespace", "default")
    out, secret_path = {}, str(folder / "no-handshake-key")
    for volume in body["spec"].get("volumes", []):
        where = folder / volume["name"]
        where.mkdir(parents=True, exist_ok=True)
        data: dict[str, bytes] = {}
        if "secret" in volume:
            got = await api.get("v1", "secrets", namespace, volume["secret"]["secretName"])
            data = {k: base64.b64decode(v) for k, v in ((got or {}).get("data") or {}).items()}
        elif "configMap" in volume:
            got = await api.get("v1", "configmaps", namespace, volume["configMap"]["name"])
            data = {k: v.encode() for k, v in ((got or {}).get("data") or {}).items()}
        elif "emptyDir" not in volume:
            continue  # pod_run names the volume it cannot mount
        for key, value in data.items():
            (where / key).write_bytes(value)
            (where / key).chmod(0o600)
            if key == HMAC_KEY and "secret" in volume:
                secret_path = str(where / key)
        out[volume["name"]] = str(where)
    return out, secret_path


async def env_data(api: Api, body: Mapping[str, Any]) -> kubelet_env.Data:
    """Every ConfigMap and Secret the pod's env reads, read now."""
    namespace = body["metadata"].get("namespace", "default")
    wanted = {ref for c in body["spec"].get("containers", []) for ref in kubelet_env.references(c)}
    found = []
    for kind, name in sorted(wanted):
        got = await api.get("v1", "secrets" if kind == "Secret" else "configmaps", namespace, name)
        if got is not None:
            found.append({**got, "kind": kind})
    return kubelet_env.data_of(found)
