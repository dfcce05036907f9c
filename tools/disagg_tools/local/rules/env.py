"""A container's environment, command and args as the kubelet makes them, for every local
runtime (processes, the local kubelet, podman pods).

Ported from Kubernetes 1.36: ``makeEnvironmentVariables`` and
``podFieldSelectorRuntimeValue`` (pkg/kubelet/kubelet_pods.go),
``ExpandContainerCommandAndArgs`` (pkg/kubelet/container/helpers.go) and ``$(VAR)``
expansion (third_party/forked/golang/expansion). ``envFrom`` comes first; then each
``env`` entry in order: a non-empty value has its ``$(VAR)`` expanded against the variables
before it, a ``valueFrom`` is read from the pod, the container's resources, a ConfigMap or
a Secret (an ``optional`` one that is missing leaves the variable out); command and args
are expanded against the whole env. Service variables are not made: the operator renders
``enableServiceLinks: false`` and no local runtime has the ``kubernetes`` Service.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_operator.derive.resources import parse_quantity

# (kind, name) → the object's data, None when there is no such object
Data = Callable[[str, str], Mapping[str, bytes] | None]
KINDS = (("ConfigMap", "configMapRef", "configMapKeyRef"), ("Secret", "secretRef", "secretKeyRef"))


class EnvError(ValueError):
    """A variable the kubelet would fail the container on; the message names it."""


class Missing(EnvError):
    """A ConfigMap or Secret the pod reads does not exist (yet): a kubelet keeps the pod
    waiting and tries again; a one-shot run stops, naming it."""


def expand(text: str, *known: Mapping[str, str]) -> str:
    """``$(VAR)`` replaced by the first of ``known`` that has VAR (left as written when none
    has it), ``$$`` by ``$``, any other ``$`` kept: expansion.Expand with MappingFuncFor."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        after = text[i + 1]
        if after == "(":
            close = text.find(")", i + 2)
            if close == -1:  # not a reference: "$(" kept, the rest read on
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            out.append(next((k[name] for k in known if name in k), f"$({name})"))
            i = close + 1
        else:  # "$$" is one "$"; "$x" stays "$x"
            out.append("$" if after == "$" else text[i : i + 2])
            i += 2
    return "".join(out)


@dataclass(frozen=True)
class PodFields:
    """What a pod's ``fieldRef`` s read: the pod, its address, its node's address and
    name."""

    pod: Mapping[str, Any]
    ip: str
    host_ip: str
    node: str

    def field(self, path: str, at: str) -> str:
        meta, spec = self.pod["metadata"], self.pod["spec"]
        plain = {
            "metadata.name": meta["name"],
            "metadata.namespace": meta.get("namespace", "default"),
            "metadata.uid": meta.get("uid", "local"),
            "status.podIP": self.ip,
            "status.podIPs": self.ip,
            "status.hostIP": self.host_ip,
            "status.hostIPs": self.host_ip,
            "spec.nodeName": self.node,
            "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        }
        if path in plain:
            return str(plain[path])
        found = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        if found:
            return str(meta.get(found.group(1), {}).get(found.group(2), ""))
        if path in ("metadata.labels", "metadata.annotations"):
            items = meta.get(path.split(".")[1], {})
            return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
        raise EnvError(f"{at}: fieldRef {path!r} is not one a kubelet resolves")


def object_data(obj: Mapping[str, Any]) -> dict[str, bytes]:
    """A ConfigMap's or Secret's keys as bytes (``data``, ``binaryData``, ``stringData``)."""
    secret = obj.get("kind") == "Secret"
    out = {
        k: base64.b64decode(v) if secret else str(v).encode()
        for k, v in (obj.get("data") or {}).items()
    }
    out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
    out.update({k: str(v).encode() for k, v in (obj.get("stringData") or {}).items()})
    return out


def data_of(objects: Sequence[Mapping[str, Any]]) -> Data:
    """:data:`Data` over rendered objects (their ConfigMaps and Secrets)."""
    found = {
        (o["kind"], o["metadata"]["name"]): object_data(o)
        for o in objects
        if o.get("kind") in ("ConfigMap", "Secret")
    }
    return lambda kind, name: found.get((kind, name))


def references(container: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The (kind, name) of every ConfigMap and Secret the container's env reads."""
    out = set()
    for kind, whole, one in KINDS:
        out |= {(kind, s[whole]["name"]) for s in container.get("envFrom", []) if whole in s}
        out |= {
            (kind, ref["name"])
            for e in container.get("env", [])
            if (ref := (e.get("valueFrom") or {}).get(one))
        }
    return out


def container_env(
    at: str, container: Mapping[str, Any], fields: PodFields, data: Data
) -> dict[str, str]:
    """The container's environment (module docstring); ``at`` names it in errors."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        for kind, whole, _ in KINDS:
            if whole in source:
                ref = source[whole]
                got = lookup(at, kind, ref.get("name", ""), ref.get("optional"), data)
                prefix = source.get("prefix", "")
                env.update({prefix + k: v.decode() for k, v in (got or {}).items()})
    for item in container.get("env", []):
        key, value = item["name"], str(item.get("value", ""))
        where = f"{at} env {key}"
        source = item.get("valueFrom")
        if value:
            env[key] = expand(value, env)
        elif source is None:
            env[key] = ""
        elif "fieldRef" in source:
            env[key] = fields.field(source["fieldRef"]["fieldPath"], where)
        elif "resourceFieldRef" in source:
            env[key] = _resource(where, container, source["resourceFieldRef"])
        else:
            found = _key(where, source, data)
            if found is not None:
                env[key] = found
    return env


def container_command(container: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """The container's command and args, each ``$(VAR)`` expanded against ``env``."""
    return [expand(a, env) for a in [*container.get("command", []), *container.get("args", [])]]


def lookup(
    at: str, kind: str, name: str, optional: bool | None, data: Data
) -> Mapping[str, bytes] | None:
    """ConfigMap or Secret ``name``'s data; None when it is missing and ``optional``."""
    got = data(kind, name)
    if got is None and not optional:
        raise Missing(
            f"{at}: {kind} {name!r} does not exist (a kubelet would not start the "
            "container); create it or mark the reference optional"
        )
    return got


def _key(at: str, source: Mapping[str, Any], data: Data) -> str | None:
    """A ``configMapKeyRef`` or ``secretKeyRef``; None: optional and not there."""
    for kind, _, one in KINDS:
        if one in source:
            ref = source[one]
            got = lookup(at, kind, ref.get("name", ""), ref.get("optional"), data)
            if got is None:
                return None
            if ref.get("key") in got:
                return got[ref["key"]].decode()
            if ref.get("optional"):
                return None
            raise EnvError(f"{at}: {kind} {ref.get('name')!r} has no key {ref.get('key')!r}")
    raise EnvError(f"{at}: valueFrom {sorted(source)} is not one the local runtimes read")


def _resource(at: str, container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    """A ``resourceFieldRef`` of a resource the container sets (a kubelet falls back to
    the node's allocatable for an unset limit; here that is refused by name)."""
    kind, _, what = ref["resource"].partition(".")
    value = container.get("resources", {}).get(kind, {}).get(what)
    if value is None:
        raise EnvError(f"{at}: resourceFieldRef {ref['resource']} is not set on the container")
    divisor = parse_quantity(ref.get("divisor", "1"))
    return str(math.ceil(parse_quantity(value) / divisor))
