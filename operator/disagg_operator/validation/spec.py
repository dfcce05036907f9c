"""Validation of a DisaggregatedDeployment body: schema errors and semantic checks.

:func:`parse` turns a body dict into the model plus a list of
:class:`Problem` (field path in camelCase, message saying what is wrong and the fix).
It re-checks every CEL rule of the CRD (``disagg render`` and API emulators have no
admission) and adds what CEL cannot know: the settings' platforms (out-of-tree devices)
and engines, the kvBufferDevice table, which NIXL backend moves which memory type, GPU
resources, args and env that would fight a derived value; then the deployment's engine
adds what it cannot run (:meth:`Engine.problems`, its CEL rules included).

Public API: ``Problem``, ``InvalidSpec`` (from :mod:`disagg_operator.api.problems`),
``parse(body, settings) -> (model | None, problems)``, ``check(dd, settings) -> problems``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from disagg_contract import platforms, ucx
from disagg_operator.api import (
    CANARY_PORT,
    ENGINE_BEHIND_SIDECAR_PORT,
    HTTP_PORT,
    KV_REVISION_CHARS,
    ROLES,
    DeploymentSpec,
    DisaggregatedDeployment,
    RolloutStrategy,
    foreign,
    rules,
)
from disagg_operator.api.problems import InvalidSpec, Problem
from disagg_operator.contracts import llmd
from disagg_operator.derive import model as model_source
from disagg_operator.derive import transfer
from disagg_operator.derive.resources import parse_quantity
from disagg_operator.derive.scaling import effective_replicas, resolve, surge, with_planned
from disagg_operator.derive.scaling import problems as scaling_problems
from disagg_operator.engines.base import Engine, spec_fields
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.validation import corev1, groups, pods, rdma

__all__ = ["InvalidSpec", "Problem", "check", "parse"]

# Longest child name: <name>-prefill-<i>; pod hostnames and Service names are DNS labels.
MAX_LABEL = 63
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def parse(
    body: dict[str, Any], settings: Settings = DEFAULT
) -> tuple[DisaggregatedDeployment | None, list[Problem]]:
    """Body dict → (model, problems). Model is None when the schema itself fails. With
    ``spec.autoscaling`` the model's replicas are the planner's (``status.<role>.
    plannedReplicas``): what the operator renders and checks."""
    try:
        dd = settings.model.model_validate(body)
    except ValidationError as e:
        return None, _schema_problems(e)
    dd = dd.model_copy(update={"spec": with_planned(dd.spec, body.get("status"))})
    return dd, check(dd, settings)


def _schema_problems(err: ValidationError) -> list[Problem]:
    problems = []
    for item in err.errors():
        # Unions add the member type to the path; drop those pseudo-segments (not fields
        # whose names merely start like one: interval, strategy)
        loc = [str(p) for p in item["loc"] if not _union_member(str(p))]
        path = _join(loc)
        msg = str(item["msg"]).removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            msg = "unknown field; remove it or check its spelling (fields are camelCase)"
        elif item["type"] == "missing":
            msg = "required; add it"
        elif "input" in item and not isinstance(item["input"], (dict, list)):
            msg = f"{msg} (got {item['input']!r})"
        problems.append(Problem(path, msg))
    return problems


def _union_member(part: str) -> bool:
    return part in ("int", "str", "float", "bool") or part.startswith("function-") or "[" in part


def _join(loc: list[str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def check(dd: DisaggregatedDeployment, settings: Settings = DEFAULT) -> list[Problem]:
    """Semantic checks of a schema-valid deployment (CEL rules included)."""
    spec = dd.spec
    engine = settings.engines.get(spec.engine.type)
    if engine is None:
        known = ", ".join(settings.engines)
        return [Problem("spec.engine.type", f"unknown engine {spec.engine.type!r}; use {known}")]
    problems = list(_foreign(spec, settings))
    problems += _names(dd.metadata.name, spec)
    problems += _model(spec)
    problems += _devices(spec, settings)
    if any(p.field.endswith(".device") for p in problems):
        return problems  # later checks need known devices
    problems += _rollouts(spec)
    problems += _backends(spec, settings)
    problems += _lease(spec)
    problems += _ucx_reach(spec)
    problems += rdma.problems(spec)
    problems += groups.problems(spec, engine, dd.metadata.name, _top(spec))
    problems += _resources(spec, settings, engine)
    problems += _llmd(spec)
    problems += _router(spec, settings)
    problems += _routing(spec, engine)
    problems += _access(spec)
    problems += _ports(spec, engine)
    problems += scaling_problems(spec)
    problems += _overrides(spec, engine)
    problems += pods.passthrough(spec)
    problems += pods.overlay(spec, engine, settings)
    problems += engine.problems(spec, settings)
    return problems


def _foreign(spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
    """Fields of other engines than the spec's (each engine's own, api/extension.py)."""
    for path, owners in foreign(spec, spec_fields(settings.engines), spec.engine.type):
        named = " and ".join(f"engine {o}" for o in owners)
        yield Problem(
            path,
            f"a field of {named}; engine {spec.engine.type} does not read it: remove it "
            f"(or use {named})",
        )


def _top(spec: DeploymentSpec) -> int:
    """The highest instance index a rollout may use: up to twice the replicas plus the
    surge (a new KV revision's instances beside the old ones)."""
    return max(max_index(effective_replicas(spec, r), spec.role(r).rollout) for r in ROLES)


def _names(name: str, spec: DeploymentSpec) -> Iterator[Problem]:
    # Names must fit every index a rollout may use (_top).
    top = _top(spec)
    longest = max(f"{name}-prefill-{top}", f"{name}-p-{'0' * KV_REVISION_CHARS}", key=len)
    if len(longest) > MAX_LABEL:
        yield Problem(
            "metadata.name",
            f"too long: child name {longest!r} exceeds {MAX_LABEL} characters; "
            f"use a name of at most {MAX_LABEL - len(longest) + len(name)} characters",
        )
    if not DNS_LABEL.match(name):
        yield Problem(
            "metadata.name",
            f"{name!r} is not a DNS label: use lowercase letters, digits and '-', starting "
            "with a letter (child Service names and pod hostnames derive from it)",
        )


def _model(spec: DeploymentSpec) -> Iterator[Problem]:
    why = model_source.problem(spec.model)
    if why:
        yield Problem("spec.model", why)
    if spec.model_cache is not None and model_source.scheme(spec.model) != "hf":
        yield Problem(
            "spec.modelCache", "applies to hf:// models only; remove it or use an hf:// model"
        )


def max_index(replicas: int, strategy: RolloutStrategy) -> int:
    """The highest pod index a rollout of this role can use (a bound on pod names): a new
    KV revision's pods beside the old one's, plus the surge (old pods may sit above the
    replicas after a scale-down)."""
    extra = surge(strategy, replicas, one_revision=True)  # the widest a roll takes
    return max(0, 2 * replicas + extra - 1)


def _rollouts(spec: DeploymentSpec) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        replicas = effective_replicas(spec, role)
        extra = surge(r.rollout, replicas)
        unavailable = resolve(r.rollout.max_unavailable, replicas, round_up=False)
        if replicas > 0 and extra == 0 and unavailable == 0 and r.rollout.strategy != "Recreate":
            yield Problem(
                f"spec.{role}.rollout",
                f"maxSurge {r.rollout.max_surge!r} and maxUnavailable "
                f"{r.rollout.max_unavailable!r} both come to 0 pods of {replicas}: a "
                "rollout could never replace a pod; allow a surge (e.g. maxSurge: 1) or "
                "an unavailable pod (maxUnavailable: 1)",
            )


def _devices(spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
    known = sorted(settings.platforms)
    for role in ROLES:
        r = spec.role(role)
        try:
            platform = platforms.get_platform(r.device, settings.platforms)
        except ValueError:
            yield Problem(
                f"spec.{role}.device",
                f"unknown device {r.device!r}; use one of {', '.join(known)} "
                "(or declare it in the operator's platforms file: docs/install.md)",
            )
            continue
        allowed = platform.buffer_devices
        if r.kv_buffer_device is not None and r.kv_buffer_device not in allowed:
            yield Problem(
                f"spec.{role}.kvBufferDevice",
                f"{r.kv_buffer_device!r} is not supported on device {r.device!r}; use one of "
                f"{', '.join(allowed)} or omit it to derive it",
            )


def _backends(spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
    backends = spec.kv_transfer.backends
    if len(set(backends)) != len(backends):
        yield rules.BACKENDS_UNIQUE_RULE.problem(found=", ".join(backends))
    if not platforms.reaches_peer(backends):
        yield rules.BACKENDS_REMOTE_RULE.problem(found=", ".join(backends))
    for role in ROLES:
        try:
            platforms.check_backends(
                list(backends),
                transfer.buffer_device(spec, role, settings.platforms),
                spec.role(role).device,
                settings.platforms,
            )
        except platforms.LocalOnlyBackends:
            continue  # the rule's problem above, once for both roles
        except ValueError as e:
            yield Problem("spec.kvTransfer.backends", f"{role}: {e}")


def _lease(spec: DeploymentSpec) -> Iterator[Problem]:
    kv = spec.kv_transfer
    if kv.block_lease_seconds <= kv.transfer_deadline_seconds:
        found = (
            f"blockLeaseSeconds {kv.block_lease_seconds:g}, transferDeadlineSeconds "
            f"{kv.transfer_deadline_seconds:g}"
        )
        yield rules.LEASE_RULE.problem(found=found)


def _ucx_reach(spec: DeploymentSpec) -> Iterator[Problem]:
    tls = spec.kv_transfer.ucx_tls
    if tls is not None and ucx.host_only(tls):
        yield rules.UCX_REACH_RULE.problem(found=repr(tls))


def _resources(spec: DeploymentSpec, settings: Settings, engine: Engine) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        resource = platforms.get_platform(r.device, settings.platforms).accelerator_resource
        limits = (r.resources.limits if r.resources else None) or {}
        requests = (r.resources.requests if r.resources else None) or {}
        for where, source in (("limits", limits), ("requests", requests)):
            for key, value in source.items():
                try:
                    parse_quantity(value)
                except ValueError as e:
                    yield Problem(f"spec.{role}.resources.{where}[{key}]", str(e))
        yield from corev1.resource_problems(f"spec.{role}.resources", requests, limits)
        yield from _claims(spec, role)
        if resource is not None and effective_replicas(spec, role) > 0:
            yield from _accelerators(spec, role, resource, engine)


def _accelerators(
    spec: DeploymentSpec, role: str, resource: str, engine: Engine
) -> Iterator[Problem]:
    """An accelerator pool's devices: from the device resource's limit or from resource
    claims (claimedDevices), as many as its ranks."""
    r = spec.role(role)
    limits = (r.resources.limits if r.resources else None) or {}
    requests = (r.resources.requests if r.resources else None) or {}
    ranks = engine.devices_per_pod(spec, role)
    nodes, engines = r.nodes_per_instance, engine.data_parallel_size(spec, role)
    claims = bool(r.resources and r.resources.claims)
    if resource in limits and r.claimed_devices is not None:
        yield Problem(
            f"spec.{role}.claimedDevices",
            f"the pool's devices come from limits['{resource}']; remove claimedDevices "
            "(it counts devices of resource claims)",
        )
    elif resource in limits:
        at = f"spec.{role}.resources.limits[{resource}]"
        yield from _device_count(
            at, limits[resource], ranks, r.tensor_parallel_size, nodes, engines
        )
    elif claims and r.claimed_devices is None:
        yield Problem(
            f"spec.{role}.claimedDevices",
            f"required: resources.claims gives device {r.device!r} its devices, and the "
            "claim's template is not read here; set the devices one pod gets "
            f"(tensorParallelSize needs {ranks})",
        )
    elif claims:
        at = f"spec.{role}.claimedDevices"
        yield from _device_count(
            at, r.claimed_devices or 0, ranks, r.tensor_parallel_size, nodes, engines
        )
    elif resource not in requests:  # else the API server's rule names it
        yield Problem(
            f"spec.{role}.resources.limits",
            f"device {r.device!r} needs the {resource} resource; add "
            f"resources.limits['{resource}']: {ranks}, or a resource claim "
            "(resources.claims with podTemplate.spec.resourceClaims and claimedDevices)",
        )


def _claims(spec: DeploymentSpec, role: str) -> Iterator[Problem]:
    """A container's claims name the pod's (the API server's validateResourceClaimNames)."""
    r = spec.role(role)
    template = r.pod_template.spec if r.pod_template else None
    named = {c.get("name") for c in (template.resource_claims if template else None) or []}
    for i, claim in enumerate((r.resources.claims if r.resources else None) or []):
        if claim.name not in named:
            yield Problem(
                f"spec.{role}.resources.claims[{i}].name",
                f"{claim.name!r} is not a claim of the pod; add it to "
                f"spec.{role}.podTemplate.spec.resourceClaims",
            )
    for i, c in enumerate((template.resource_claims if template else None) or []):
        at = f"spec.{role}.podTemplate.spec.resourceClaims[{i}]"
        yield from corev1.schema_problems(at, c, "PodResourceClaim")


def _device_count(
    at: str, value: int | str, ranks: int, tp: int, nodes: int = 1, engines: int = 1
) -> Iterator[Problem]:
    """A pod's accelerators against the ranks that compute on them (``ranks`` per pod, an
    instance spanning ``nodes`` pods, ``engines`` data-parallel engines a pod): fewer
    cannot start, more sit idle (the scheduler still reserves them)."""
    try:
        count = parse_quantity(value)
    except ValueError:
        return  # reported with the quantities
    if count != int(count):
        return  # not a whole number: reported with the API server's rules
    stages = ranks * nodes // (tp * engines)
    shown = f"tensorParallelSize {tp}" + (f" x {stages} pipeline stages" if stages > 1 else "")
    shown += f" x {engines} data-parallel engines" if engines > 1 else ""
    shown += f" over {nodes} pods" if nodes > 1 else ""
    if count < ranks:
        yield Problem(at, f"{count:g} devices for {shown}; set it to {ranks}")
    elif count > ranks:
        yield Problem(
            at,
            f"{count:g} devices for {shown}: {count - ranks:g} would sit idle, held from "
            f"other pods; set it to {ranks} (or raise tensorParallelSize)",
        )


def _llmd(spec: DeploymentSpec) -> Iterator[Problem]:
    sidecar = spec.llmd.routing_sidecar
    if sidecar.enabled and not spec.llmd.enabled:
        yield rules.SIDECAR_NEEDS_LLMD_RULE.problem()
    if sidecar.enabled and not sidecar.image:
        yield rules.SIDECAR_IMAGE_RULE.problem(found=f"e.g. {llmd.IMAGE_EXAMPLE}")
    for i, arg in enumerate(sidecar.args or []):
        why = llmd.flag_problem(arg)
        if why:
            yield Problem(f"spec.llmd.routingSidecar.args[{i}]", why)


def _routing(spec: DeploymentSpec, engine: Engine) -> Iterator[Problem]:
    policy = spec.routing
    if policy.prefill_queue_limit is not None and policy.disaggregate != "threshold":
        yield rules.ROUTING_QUEUE_RULE.problem()
    if policy.prefix_index == "events" and engine.prefix_cache_block(spec) is None:
        yield Problem(
            "spec.routing.prefixIndex",
            f"events are what a decode engine says its prefix cache holds; engine "
            f"{spec.engine.type} keeps no prefix cache (or its args turn it off): use "
            "approximate",
        )


def _router(spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
    r = spec.router
    if not r.enabled:
        return
    if spec.llmd.enabled and spec.llmd.routing_sidecar.enabled:
        yield Problem(
            "spec.router.enabled",
            "the llm-d routing sidecar already routes each request (with its endpoint "
            "picker); turn one of them off",
        )
    if not (r.image or settings.engine(spec).canary_image(spec, settings)):
        yield Problem(
            "spec.router.image",
            "required: the operator was started without a worker image (the chart's "
            "transferCanary.image, --canary-image); set an image with the `disagg` command",
        )
    yield from corev1.schema_problems("spec.router.resources", r.resources, "ResourceRequirements")


def _access(spec: DeploymentSpec) -> Iterator[Problem]:
    for i, peer in enumerate(spec.serving_access or []):
        yield from corev1.schema_problems(f"spec.servingAccess[{i}]", peer, "NetworkPolicyPeer")
        if isinstance(peer, dict) and not peer:
            yield Problem(
                f"spec.servingAccess[{i}]",
                "an empty peer selects nothing in a NetworkPolicy; name a podSelector, "
                "namespaceSelector or ipBlock ({namespaceSelector: {}}: every namespace)",
            )


def _ports(spec: DeploymentSpec, engine: Engine) -> Iterator[Problem]:
    """Each role's side-channel ports (one per TP rank or per data-parallel engine, by the
    engine's rule) clear of the pod's other declared ports, and at most 65535."""
    for role in ROLES:
        taken = {HTTP_PORT: "the serving port", ENGINE_BEHIND_SIDECAR_PORT: "the serving port"}
        if engine.metrics_port(spec) is not None:
            taken[engine.metrics_port(spec) or 0] = "the engine's metrics port"
        if role == "decode" and spec.transfer_canary.enabled:
            taken[CANARY_PORT] = "the transfer canary's port"
        taken.update(dict.fromkeys(engine.kv_events_ports(spec, role), "the KV events port"))
        ports = engine.side_channel_ports(spec, role)
        if not ports:  # an engine without a side channel of ours
            continue
        dp = engine.data_parallel_size(spec, role)
        shown = (
            f"{role} side-channel ports {min(ports)}-{max(ports)}"
            if len(ports) > 1
            else (f"{role} side-channel port {ports[0]}")
        )
        why = f" (a port per data-parallel engine: --data-parallel-size {dp})" if dp > 1 else ""
        clash = sorted(set(taken).intersection(ports))
        if clash:
            yield Problem(
                "spec.kvTransfer.sideChannelPort",
                f"{shown}{why} overlap {taken[clash[0]]} {clash[0]}; choose a port with "
                f"{len(ports)} free from it (default 5600)",
            )
            return
        if max(ports) > 65535:
            yield Problem(
                "spec.kvTransfer.sideChannelPort",
                f"{shown}{why} run past 65535; choose at most {65536 - len(ports)}",
            )
            return


def _flag_name(arg: str) -> str:
    """The flag ``arg`` sets as vLLM's parser reads it (FlexibleArgumentParser, 0.32.0):
    ``--a_b=1`` is ``--a-b``, and ``--json-flag.key=v`` sets a key of ``--json-flag``."""
    name = arg.split("=", 1)[0]
    if not name.startswith("--"):
        return name
    return "--" + name[2:].split(".", 1)[0].replace("_", "-")


def _overrides(spec: DeploymentSpec, engine: Engine) -> Iterator[Problem]:
    """Args and env that would fight a value the engine derives: refused, naming the spec
    field that sets it instead."""
    for role in ROLES:
        r = spec.role(role)
        for i, arg in enumerate(r.args or []):
            flag = _flag_name(arg)
            if flag in engine.derived_flags:
                use = engine.derived_flags[flag].replace("<role>", role)
                yield Problem(f"spec.{role}.args[{i}]", f"{flag} is derived; set {use}")
        derived = (
            {
                **engine.derived_env(spec, role),
                **dict.fromkeys(transfer.rdma_env_names(), rdma.where(spec, role)),
            }
            if transfer.rdma(spec, role)
            else engine.derived_env(spec, role)
        )
        for i, env in enumerate(r.env or []):
            if env.name in derived:
                use = derived[env.name].replace("<role>", role)
                yield Problem(f"spec.{role}.env[{i}]", f"{env.name} is derived; set {use}")
