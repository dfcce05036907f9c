"""What users hand to the pods: the pass-through core/v1 fields and the pod overlay.

:func:`passthrough` checks env, affinity and spread
constraints against the core/v1 schemas and the API server's pod rules
(:mod:`.corev1`); :func:`overlay` checks ``spec.<role>.podTemplate`` the same way and
refuses, by field and with the fix, what would break a derived setting: a container
field the operator derives (image, command, ports, probes, the preStop drain), a volume
or mount path the engine already uses, a port of the pod, the operator's labels, a grace
period shorter than the drain. The merge itself is :mod:`disagg_operator.render.overlay`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from disagg_operator.api import (
    CANARY_PORT,
    ENGINE_BEHIND_SIDECAR_PORT,
    GROUP,
    HTTP_PORT,
    LABEL_LLMD_ROLE,
    ROLES,
    DeploymentSpec,
)
from disagg_operator.api.podtemplate import (
    DERIVED_CONTAINERS,
    ENGINE_CONTAINER,
    PodTemplate,
    PodTemplateSpec,
)
from disagg_operator.api.problems import Problem
from disagg_operator.derive import model as model_source
from disagg_operator.derive import scaling
from disagg_operator.engines.base import Engine
from disagg_operator.engines.settings import Settings
from disagg_operator.validation import corev1

# Fields of a derived container a podTemplate may set (merged); the rest are refused.
MERGED = frozenset(
    {
        "name",
        "volumeMounts",
        "envFrom",
        "env",
        "resources",
        "securityContext",
        "livenessProbe",
        "imagePullPolicy",
        "terminationMessagePath",
        "terminationMessagePolicy",
    }
)
# Where a refused field of a derived container is set instead.
DERIVED_FIELD_FIX = {
    "image": "set spec.<role>.image (engine), spec.llmd.routingSidecar.image or "
    "spec.transferCanary.image",
    "command": "the operator derives it; add engine arguments with spec.<role>.args",
    "args": "the operator derives them; add engine arguments with spec.<role>.args "
    "(the sidecar's with spec.llmd.routingSidecar.args)",
    "ports": "the operator derives the ports (serving, side channel, canary)",
    "readinessProbe": "the operator derives readiness (the engine's /health, the canary)",
    "startupProbe": "the operator derives the startup probe",
    "lifecycle": "the preStop is the derived drain; raise it with spec.<role>.drainSeconds",
}
ENGINE_ONLY_FIX = {
    "resources": "set spec.<role>.resources (the CPU and memory derivations read it)",
    "env": "set spec.<role>.env (derived names are checked there)",
}


def passthrough(spec: DeploymentSpec) -> Iterator[Problem]:
    """core/v1 schema and pod rules of the role fields passed to the pods as given."""
    for role in ROLES:
        r, at = spec.role(role), f"spec.{role}"
        first: dict[str, int] = {}
        for i, env in enumerate(r.env or []):
            if env.name in first:
                yield Problem(
                    f"{at}.env[{i}].name",
                    f"{env.name!r} is listed twice (env[{first[env.name]}] too) and the pods "
                    "would take the last; keep one entry per name",
                )
            first.setdefault(env.name, i)
            item = env.model_dump(by_alias=True, exclude_none=True)
            yield from corev1.env_problems(f"{at}.env[{i}]", item)
            yield from corev1.schema_problems(
                f"{at}.env[{i}].valueFrom", env.value_from, "EnvVarSource"
            )
        yield from corev1.schema_problems(f"{at}.affinity", r.affinity, "Affinity")
        for i, c in enumerate(r.topology_spread_constraints or []):
            yield from corev1.schema_problems(
                f"{at}.topologySpreadConstraints[{i}]", c, "TopologySpreadConstraint"
            )


def overlay(spec: DeploymentSpec, engine: Engine, settings: Settings) -> Iterator[Problem]:
    """Problems of each role's podTemplate."""
    for role in ROLES:
        template = spec.role(role).pod_template
        if template is not None:
            yield from _template(spec, role, template, engine, settings)


@dataclass(frozen=True)
class _Pod:
    """What the operator derives for one role's pods that an overlay must not collide
    with: where problems are reported, the volumes (derived and the overlay's), the
    pod's ports, the engine container's own mount paths, and the drain."""

    role: str
    at: str
    derived_volumes: frozenset[str]
    volumes: frozenset[str]
    ports: frozenset[int]
    engine_mounts: frozenset[str]
    drain: int

    @staticmethod
    def of(
        spec: DeploymentSpec, role: str, s: PodTemplateSpec, engine: Engine, settings: Settings
    ) -> _Pod:
        source = model_source.source(spec)
        derived = {v["name"] for v in [*engine.volumes(spec, "x", role), *source.volumes]}
        given = {v.get("name") for v in s.volumes or [] if isinstance(v, dict)}
        mounts = [*engine.container(spec, role, HTTP_PORT, settings).mounts, *source.mounts]
        ports = {HTTP_PORT, ENGINE_BEHIND_SIDECAR_PORT, CANARY_PORT}
        return _Pod(
            role,
            f"spec.{role}.podTemplate",
            frozenset(derived),
            frozenset(derived | {n for n in given if isinstance(n, str)}),
            frozenset(ports | set(engine.side_channel_ports(spec, role))),
            frozenset(m["mountPath"] for m in mounts),
            scaling.prestop_seconds(spec, role, engine.drain_seconds(spec)),
        )


def _template(
    spec: DeploymentSpec, role: str, t: PodTemplate, engine: Engine, settings: Settings
) -> Iterator[Problem]:
    at = f"spec.{role}.podTemplate"
    yield from _metadata(at, t)
    s = t.spec
    if s is None:
        return
    pod = _Pod.of(spec, role, s, engine, settings)
    yield from _pod_fields(pod, s)
    yield from _containers(pod, s.init_containers or [], "initContainers", init=True)
    yield from _containers(pod, s.containers or [], "containers", init=False)


def _metadata(at: str, t: PodTemplate) -> Iterator[Problem]:
    meta = t.metadata
    for where, values in (
        ("labels", meta and meta.labels),
        ("annotations", meta and meta.annotations),
    ):
        for key in values or {}:
            if key.split("/")[0].endswith(GROUP) or key == LABEL_LLMD_ROLE:
                yield Problem(f"{at}.metadata.{where}[{key}]", "is the operator's key; use another")


def _pod_fields(pod: _Pod, s: PodTemplateSpec) -> Iterator[Problem]:
    at = f"{pod.at}.spec"
    for i, v in enumerate(s.volumes or []):
        yield from corev1.schema_problems(f"{at}.volumes[{i}]", v, "Volume")
        yield from corev1.volume_problems(f"{at}.volumes[{i}]", v)
        if v.get("name") in pod.derived_volumes:
            yield Problem(
                f"{at}.volumes[{i}].name", f"{v['name']!r} is the engine's volume; rename it"
            )
    for i, ref in enumerate(s.image_pull_secrets or []):
        yield from corev1.schema_problems(
            f"{at}.imagePullSecrets[{i}]", ref, "LocalObjectReference"
        )
    yield from corev1.schema_problems(
        f"{at}.securityContext", s.security_context, "PodSecurityContext"
    )
    given = s.termination_grace_period_seconds
    if given is not None and given < pod.drain:
        yield Problem(
            f"{at}.terminationGracePeriodSeconds",
            f"{given} s is shorter than the pod's settle and drain ({pod.drain} s): it would cut "
            f"in-flight work; omit it, or lower spec.{pod.role}.drainSeconds",
        )


def _containers(
    pod: _Pod, containers: list[dict[str, Any]], field: str, *, init: bool
) -> Iterator[Problem]:
    names: set[str] = set()
    for i, c in enumerate(containers):
        where = f"{pod.at}.spec.{field}[{i}]"
        schema = corev1.schema_problems(where, c, "Container")
        yield from schema
        if schema:
            continue
        name = c["name"]
        yield from corev1.container_name_problems(f"{where}.name", name)
        if name in names:
            yield Problem(f"{where}.name", f"{name!r} is listed twice; merge the entries")
        names.add(name)
        yield from _kind_of(pod, name, c, where, init=init)
        for j, env in enumerate(c.get("env") or []):
            yield from corev1.env_problems(f"{where}.env[{j}]", env)
        yield from _mounts(pod, name, c, where)


def _kind_of(
    pod: _Pod, name: str, c: dict[str, Any], where: str, *, init: bool
) -> Iterator[Problem]:
    """A derived container merged, an init container, or an extra container."""
    derived = name in DERIVED_CONTAINERS
    if init and name == model_source.DOWNLOAD_CONTAINER:
        yield Problem(f"{where}.name", f"{name!r} is the model download's; rename it")
    if derived and init:
        yield Problem(
            f"{where}.name", f"{name!r} is a container of the pod; rename the init container"
        )
        return
    if derived:
        yield from _merged(pod.role, name, c, where)
        return
    if not c.get("image"):
        yield Problem(
            f"{where}.image",
            "an extra container needs an image (or name a derived one: "
            f"{', '.join(DERIVED_CONTAINERS)})",
        )
    for j, port in enumerate(c.get("ports") or []):
        if port.get("containerPort") in pod.ports:
            yield Problem(
                f"{where}.ports[{j}].containerPort",
                f"{port['containerPort']} is a derived port of the pod "
                f"({', '.join(map(str, sorted(pod.ports)))}); use another",
            )


def _merged(role: str, name: str, c: dict[str, Any], where: str) -> Iterator[Problem]:
    for key in c:
        fix = DERIVED_FIELD_FIX.get(key) if key not in MERGED else None
        if name == ENGINE_CONTAINER and key in ENGINE_ONLY_FIX:
            fix = ENGINE_ONLY_FIX[key]
        elif key not in MERGED and fix is None:
            fix = f"a derived container takes only {', '.join(sorted(MERGED - {'name'}))}"
        if fix:
            yield Problem(
                f"{where}.{key}",
                f"cannot be set on the {name} container: {fix.replace('<role>', role)}",
            )


def _mounts(pod: _Pod, name: str, c: dict[str, Any], where: str) -> Iterator[Problem]:
    used = pod.engine_mounts if name == ENGINE_CONTAINER else frozenset()
    for j, m in enumerate(c.get("volumeMounts") or []):
        if m.get("name") not in pod.volumes:
            yield Problem(
                f"{where}.volumeMounts[{j}].name",
                f"no volume named {m.get('name')!r}; add it to podTemplate.spec.volumes",
            )
        if m.get("mountPath") in used:
            yield Problem(
                f"{where}.volumeMounts[{j}].mountPath",
                f"{m['mountPath']} is the engine's own mount; choose another path",
            )
