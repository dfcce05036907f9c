"""A pod's volumes as a kubelet makes them, for every local runtime: what stands for each
volume on this host (files, a memory folder, a claim's local folder).

Secret, ConfigMap, downwardAPI and projected volumes become their files with
the modes a kubelet gives them (``defaultMode``, ``items`` and their ``mode``, optional
sources), an emptyDir a folder (``medium: Memory``: on the host's tmpfs), a
PersistentVolumeClaim the local folder the caller gives for it (``claims``). What no local
runtime has (image volumes, other kinds) is refused with the fix. The writers are the
runtimes' (:func:`disagg_tools.local.kubelet.admit.write_volumes`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from disagg_operator.api import HMAC_KEY
from disagg_operator.derive.resources import parse_quantity
from disagg_tools.local.rules import env as kubelet_env

DEFAULT_MODE = 0o644  # a Secret's or ConfigMap's files without defaultMode
EMPTY_DIR_MODE = 0o777  # what the kubelet gives an emptyDir


class VolumeError(ValueError):
    """A volume no local runtime can give; the message names it and the fix."""


@dataclass(frozen=True)
class Volume:
    """What stands for one pod volume here: a ``folder`` of ``files`` (Secret, ConfigMap,
    downwardAPI, projected, emptyDir), a ``tmpfs`` (emptyDir in memory), or a ``claim``
    (the local folder given for a PersistentVolumeClaim)."""

    name: str
    kind: Literal["folder", "tmpfs", "claim"]
    files: Mapping[str, tuple[bytes, int]] = field(default_factory=dict)  # path → (data, mode)
    mode: int = 0o755  # the folder's own mode
    folder: str = ""  # claim: the host folder
    size: str = ""  # tmpfs: its size limit, podman syntax ("64m"), or "" (none)
    read_only: bool = False  # mounted read-only whatever the mount says (a claim so
    # declared; Secret, ConfigMap, downwardAPI and projected volumes always)
    ref: str = ""  # a Secret or claim volume: the Secret's or the claim's name


def volume(
    pod: str,
    v: Mapping[str, Any],
    ctx: kubelet_env.PodFields,
    claims: Mapping[str, str],
    data: kubelet_env.Data,
) -> Volume:
    """Pod ``pod``'s volume ``v``; ``claims`` maps a claim's name to its local folder,
    ``data`` reads the ConfigMaps and Secrets. VolumeError (or env.EnvError for a missing
    non-optional source) naming what cannot be given."""
    at, name = f"pod {pod} volume {v['name']}", v["name"]
    if "emptyDir" in v:
        given = v["emptyDir"] or {}
        size = tmpfs_size(given.get("sizeLimit"))
        if given.get("medium") == "Memory":
            return Volume(name, "tmpfs", size=size)
        return Volume(name, "folder", mode=EMPTY_DIR_MODE)
    if "persistentVolumeClaim" in v:
        claim = v["persistentVolumeClaim"]["claimName"]
        if claim not in claims:
            raise VolumeError(
                f"{at} is claim {claim!r}; give the local folder that stands for it: "
                f"--claim {claim}=DIR"
            )
        read_only = bool(v["persistentVolumeClaim"].get("readOnly"))
        return Volume(name, "claim", folder=claims[claim], read_only=read_only, ref=claim)
    if "secret" in v or "configMap" in v or "downwardAPI" in v:
        secret = (v.get("secret") or {}).get("secretName", "")
        files = dict(_files(at, v, ctx, data))
        return Volume(name, "folder", files=files, read_only=True, ref=secret)
    if "projected" in v:
        found: dict[str, tuple[bytes, int]] = {}
        mode = v["projected"].get("defaultMode", DEFAULT_MODE)
        for source in v["projected"].get("sources", []):
            if "serviceAccountToken" in source:
                continue  # no API server to issue one
            found.update(_files(at, {**source, "defaultMode": mode}, ctx, data))
        return Volume(name, "folder", files=found, read_only=True)
    if "image" in v:
        raise VolumeError(
            f"{at} mounts image {v['image'].get('reference')}; local runs have no image "
            "volumes: give a local model with --model DIR"
        )
    kinds = ", ".join(k for k in v if k != "name")
    raise VolumeError(f"{at}: {kinds} volumes are not run here")


def _files(
    at: str,
    v: Mapping[str, Any],
    ctx: kubelet_env.PodFields,
    data: kubelet_env.Data,
) -> Iterator[tuple[str, tuple[bytes, int]]]:
    """One Secret, ConfigMap or downwardAPI source's files: path → (data, mode)."""
    for kind, key in (("Secret", "secret"), ("ConfigMap", "configMap")):
        if key not in v:
            continue
        src = v[key]
        name = src.get("secretName", src.get("name", ""))  # volume: secretName; projected: name
        mode = src.get("defaultMode", v.get("defaultMode", DEFAULT_MODE))
        found = kubelet_env.lookup(at, kind, name, src.get("optional"), data) or {}
        items = src.get("items") or [{"key": k, "path": k} for k in sorted(found)]
        for item in items:
            if item["key"] not in found:
                if src.get("optional"):
                    continue
                raise VolumeError(f"{at}: {kind} {name} has no key {item['key']}")
            yield item["path"], (found[item["key"]], item.get("mode", mode))
    if "downwardAPI" in v:
        src = v["downwardAPI"]
        mode = src.get("defaultMode", v.get("defaultMode", DEFAULT_MODE))
        for item in src.get("items", []):
            if "fieldRef" in item:
                text = ctx.field(item["fieldRef"]["fieldPath"], at)
            else:
                raise VolumeError(f"{at}: downwardAPI item {item['path']}: only fieldRef is run")
            yield item["path"], (text.encode(), item.get("mode", mode))


def references(pod: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of every ConfigMap and Secret the pod's volumes read."""
    out = set()
    for v in pod["spec"].get("volumes", []):
        sources = [v, *((v.get("projected") or {}).get("sources") or [])]
        for source in sources:
            if "secret" in source:
                got = source["secret"]
                out.add(("Secret", got.get("secretName", got.get("name", ""))))
            if "configMap" in source:
                out.add(("ConfigMap", source["configMap"].get("name", "")))
    return out


def source(v: Volume, folder: str, memory: str) -> str:
    """Where volume ``v`` is on this host: a claim's folder, a memory emptyDir under
    ``memory``, any other volume under ``folder``."""
    if v.kind == "claim":
        return v.folder
    return f"{memory if v.kind == 'tmpfs' else folder}/{v.name}"


def secret_file(volumes: Sequence[Volume], folders: Mapping[str, str]) -> str:
    """The file of the handshake key, in the Secret volume that holds it ("" : none)."""
    for v in volumes:
        if v.kind == "folder" and v.ref and HMAC_KEY in v.files:
            return f"{folders[v.name]}/{HMAC_KEY}"
    return ""


def tmpfs_size(limit: int | str | None) -> str:
    """A size limit in podman's syntax (whole MiB, at least 1), or "" for none."""
    if limit is None:
        return ""
    return f"{max(1, math.ceil(parse_quantity(limit) / 2**20))}m"
