"""Validation of a DisaggregatedDeployment body: schema errors and semantic checks.

Pure layer. :func:`parse` turns a body dict into the model plus a list of
:class:`Problem` (field path in camelCase, message saying what is wrong and the fix).
It re-checks every CEL rule of the CRD (``disagg render`` and API emulators have no
admission) and adds what CEL cannot know: the platform registry (out-of-tree devices),
the kvBufferDevice table, which NIXL backend moves which memory type, GPU resources.

Public API: ``Problem``, ``InvalidSpec`` (from :mod:`disagg_operator.problems`),
``parse(body) -> (model | None, problems)``, ``check(dd) -> problems``,
``REFERENCE_DEVICES``. Engine-contract checks: :mod:`disagg_operator.engines.vllm_checks`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from disagg_operator.engines import llmd, vllm, vllm_checks
from disagg_operator.models import (
    ENGINE_BEHIND_SIDECAR_PORT,
    HTTP_PORT,
    ROLES,
    DeploymentSpec,
    DisaggregatedDeployment,
    RolloutStrategy,
)
from disagg_operator.problems import InvalidSpec, Problem
from disagg_operator.render import derive as render_derive
from disagg_operator.rollout.kvkey import KV_REVISION_CHARS
from disagg_operator.rollout.planner import Budget
from disagg_operator.scaling import effective_replicas, resolve
from disagg_operator.scaling import problems as scaling_problems
from disagg_worker import platforms, ucx
from disagg_worker.engine.presets import PRESETS

__all__ = ["REFERENCE_DEVICES", "InvalidSpec", "Problem", "check", "parse"]

# Devices the reference engine (torch, in the worker) runs on.
REFERENCE_DEVICES = ("cpu", "cuda")
# Longest child name: <name>-prefill-<i>; pod hostnames and Service names are DNS labels.
MAX_LABEL = 63
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def parse(body: dict[str, Any]) -> tuple[DisaggregatedDeployment | None, list[Problem]]:
    """Body dict → (model, problems). Model is None when the schema itself fails."""
    try:
        dd = DisaggregatedDeployment.model_validate(body)
    except ValidationError as e:
        return None, _schema_problems(e)
    return dd, check(dd)


def _schema_problems(err: ValidationError) -> list[Problem]:
    problems = []
    for item in err.errors():
        # Unions add the member type to the path; drop those pseudo-segments.
        loc = [str(p) for p in item["loc"] if not str(p).startswith(("function-", "int", "str"))]
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


def _join(loc: list[str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def check(dd: DisaggregatedDeployment) -> list[Problem]:
    """Semantic checks of a schema-valid deployment (CEL rules included)."""
    spec = dd.spec
    problems = list(_names(dd.metadata.name, spec))
    problems += _devices(spec)
    if any(p.field.endswith(".device") for p in problems):
        return problems  # later checks need known devices
    checks = (
        _rollouts,
        _backends,
        _lease,
        _ucx_reach,
        _resources,
        _reference,
        _llmd,
        _ports,
        scaling_problems,
        vllm_checks.overrides,
    )
    for check_fn in checks:
        problems += check_fn(spec)
    if spec.engine.type == "vllm":
        problems += _vllm(spec)
    else:
        problems += _tensor_parallel(spec, None)
    return problems


def _names(name: str, spec: DeploymentSpec) -> Iterator[Problem]:
    # A rollout may use indices up to twice the replicas plus the surge (a new KV
    # revision's pods beside the old ones): the name must fit those too.
    top = max(max_index(effective_replicas(spec, r), spec.role(r).rollout) for r in ROLES)
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


def max_index(replicas: int, strategy: RolloutStrategy) -> int:
    """The highest pod index a rollout of this role can use."""
    return max(0, 2 * replicas + Budget.of(replicas, strategy).surge - 1)


def _rollouts(spec: DeploymentSpec) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        replicas = effective_replicas(spec, role)
        surge = resolve(r.rollout.max_surge, replicas, round_up=True)
        unavailable = resolve(r.rollout.max_unavailable, replicas, round_up=False)
        if replicas > 0 and surge == 0 and unavailable == 0:
            yield Problem(
                f"spec.{role}.rollout",
                f"maxSurge {r.rollout.max_surge!r} and maxUnavailable "
                f"{r.rollout.max_unavailable!r} both come to 0 pods of {replicas}: a "
                "rollout could never replace a pod; allow a surge (e.g. maxSurge: 1) or "
                "an unavailable pod (maxUnavailable: 1)",
            )


def _devices(spec: DeploymentSpec) -> Iterator[Problem]:
    known = sorted(platforms.platforms())
    for role in ROLES:
        r = spec.role(role)
        try:
            platform = platforms.get_platform(r.device)
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


def _backends(spec: DeploymentSpec) -> Iterator[Problem]:
    backends = spec.kv_transfer.backends
    if len(set(backends)) != len(backends):
        yield Problem("spec.kvTransfer.backends", "lists a backend twice; list each once")
    for role in ROLES:
        try:
            platforms.check_backends(
                list(backends), render_derive.buffer_device(spec, role), spec.role(role).device
            )
        except ValueError as e:
            yield Problem("spec.kvTransfer.backends", f"{role}: {e}")


def _lease(spec: DeploymentSpec) -> Iterator[Problem]:
    kv = spec.kv_transfer
    if kv.block_lease_seconds <= kv.transfer_deadline_seconds:
        yield Problem(
            "spec.kvTransfer.blockLeaseSeconds",
            f"{kv.block_lease_seconds:g} must exceed transferDeadlineSeconds "
            f"{kv.transfer_deadline_seconds:g}, or prefill frees blocks a decode may still "
            "be reading; raise the lease",
        )


def _ucx_reach(spec: DeploymentSpec) -> Iterator[Problem]:
    tls = spec.kv_transfer.ucx_tls
    if tls is not None and ucx.host_only(tls):
        yield Problem(
            "spec.kvTransfer.ucxTls",
            f"{tls!r} lists only transports that stay inside one host; add tcp, or rc for "
            "RDMA: prefill and decode run in different pods, so shared-memory transports "
            "cannot carry KV between them",
        )


def _tensor_parallel(spec: DeploymentSpec, p: vllm.Profile | None) -> Iterator[Problem]:
    """Decode TP a multiple of prefill TP; prefill TP above decode TP only where ``p``
    serves it: vLLM >= 0.14, prefill TP a multiple of decode TP and prefill's KV heads
    not replicated (TP < heads up to 0.19, TP <= heads from 0.20)."""
    pt, dt = spec.prefill.tensor_parallel_size, spec.decode.tensor_parallel_size
    heads = spec.model_spec.num_key_value_heads
    field = "spec.prefill.tensorParallelSize"
    if pt <= dt:
        if dt % pt:
            yield Problem(
                "spec.decode.tensorParallelSize",
                f"{dt} is not a multiple of spec.prefill.tensorParallelSize {pt}; "
                f"use {pt * (dt // pt + 1)}",
            )
        return
    if p is None or heads is None:
        more = "" if p is None else " (or set spec.modelConfig.numKeyValueHeads to allow more)"
        yield Problem(
            field,
            f"{pt} exceeds spec.decode.tensorParallelSize {dt}; lower prefill TP or raise "
            f"decode TP{more}",
        )
    elif not p.prefill_tp_above_decode:
        yield Problem(
            field,
            f"{pt} exceeds spec.decode.tensorParallelSize {dt}, which vLLM "
            f"{p.label} cannot serve; use vLLM >= "
            f"{vllm.first_version('prefill_tp_above_decode')} or prefill TP <= decode TP",
        )
    elif pt % dt:
        yield Problem(field, f"{pt} is not a multiple of spec.decode.tensorParallelSize {dt}")
    elif pt > heads or (pt == heads and p.replicated_at_equal_heads):
        limit = "below" if p.replicated_at_equal_heads else "at most"
        yield Problem(
            field,
            f"{pt} replicates prefill's KV heads (numKeyValueHeads {heads}) and exceeds "
            f"decode TP {dt}; vLLM {p.label} needs prefill TP {limit} the KV heads here: "
            "lower prefill TP or raise decode TP",
        )


def _resources(spec: DeploymentSpec) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        resource = platforms.get_platform(r.device).accelerator_resource
        limits = (r.resources.limits if r.resources else None) or {}
        for where in ("limits", "requests"):
            source = getattr(r.resources, where, None) or {}
            for key, value in source.items():
                try:
                    render_derive.parse_quantity(value)
                except ValueError as e:
                    yield Problem(f"spec.{role}.resources.{where}[{key}]", str(e))
        if resource is None or effective_replicas(spec, role) == 0:
            continue
        if resource not in limits:
            yield Problem(
                f"spec.{role}.resources.limits",
                f"device {r.device!r} needs the {resource} resource; add "
                f"resources.limits['{resource}']: {r.tensor_parallel_size}",
            )
            continue
        count = render_derive.parse_quantity(limits[resource])
        if count < r.tensor_parallel_size:
            yield Problem(
                f"spec.{role}.resources.limits[{resource}]",
                f"{count:g} devices for tensorParallelSize {r.tensor_parallel_size}; "
                f"set it to {r.tensor_parallel_size}",
            )


def _reference(spec: DeploymentSpec) -> Iterator[Problem]:
    if spec.engine.type != "reference":
        return
    if spec.model not in PRESETS:
        yield Problem(
            "spec.model",
            f"the reference engine has no model {spec.model!r}; use one of its presets: "
            f"{', '.join(sorted(PRESETS))} (or engine vllm for real models)",
        )
    for role in ROLES:
        r = spec.role(role)
        if r.tensor_parallel_size != 1:
            yield Problem(
                f"spec.{role}.tensorParallelSize",
                "the reference engine runs tensorParallelSize 1 only; set 1 or use engine vllm",
            )
        if r.device not in REFERENCE_DEVICES:
            yield Problem(
                f"spec.{role}.device",
                f"the reference engine runs on {', '.join(REFERENCE_DEVICES)} only, not "
                f"{r.device!r}; change the device or use engine vllm",
            )


def _llmd(spec: DeploymentSpec) -> Iterator[Problem]:
    sidecar = spec.llmd.routing_sidecar
    if sidecar.enabled and not spec.llmd.enabled:
        yield Problem(
            "spec.llmd.routingSidecar.enabled",
            "needs spec.llmd.enabled: true; enable llm-d or disable the sidecar",
        )
    if sidecar.enabled and not sidecar.image:
        yield Problem(
            "spec.llmd.routingSidecar.image",
            f"required when the routing sidecar is enabled, e.g. {llmd.IMAGE_EXAMPLE}",
        )
    for i, arg in enumerate(sidecar.args or []):
        why = llmd.flag_problem(arg)
        if why:
            yield Problem(f"spec.llmd.routingSidecar.args[{i}]", why)


def _ports(spec: DeploymentSpec) -> Iterator[Problem]:
    taken = {HTTP_PORT, ENGINE_BEHIND_SIDECAR_PORT}
    for role in ROLES:
        clash = taken.intersection(render_derive.side_channel_ports(spec, role))
        if clash:
            yield Problem(
                "spec.kvTransfer.sideChannelPort",
                f"{role} side-channel ports overlap the serving port {min(clash)}; "
                "choose another port (default 5600)",
            )
            return


def _vllm(spec: DeploymentSpec) -> Iterator[Problem]:
    """What the deployment's vLLM version (its profile) can run."""
    found = render_derive.resolution(spec)
    if found.problem is not None:
        yield Problem(*found.problem)
    p = found.profile
    yield from _tensor_parallel(spec, p)
    yield from vllm_checks.buffers(spec, p)
    yield from vllm_checks.cpu_pools(spec, p)
    kv = spec.kv_transfer
    if kv.kv_load_failure_policy and p.failure_policy_default is None:
        yield Problem(
            "spec.kvTransfer.kvLoadFailurePolicy",
            f"vLLM {p.label} has no kv_load_failure_policy; remove it or use vLLM >= "
            f"{vllm.first_version('failure_policy_default')}",
        )
    if p.lease.kind == "extra" and render_derive.lease_seconds(spec) < p.lease.minimum:
        yield Problem(
            "spec.kvTransfer.blockLeaseSeconds",
            f"vLLM {p.label} heartbeats every lease // 6 s; set at least {p.lease.minimum}",
        )
