"""Validation of a DisaggregatedDeployment body: schema errors and semantic checks.

Pure layer. :func:`parse` turns a body dict into the model plus a list of
:class:`Problem` (field path in camelCase, message saying what is wrong and the fix).
It re-checks every CEL rule of the CRD (``disagg render`` and API emulators have no
admission) and adds what CEL cannot know: the platform registry (out-of-tree devices),
the kvBufferDevice table, which NIXL backend moves which memory type, GPU resources.

Public API: ``Problem``, ``InvalidSpec``, ``parse(body) -> (model | None, problems)``,
``check(dd) -> problems``, ``REFERENCE_DEVICES``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from disagg_operator.models import (
    ENGINE_BEHIND_SIDECAR_PORT,
    HTTP_PORT,
    ROLES,
    DeploymentSpec,
    DisaggregatedDeployment,
)
from disagg_operator.render import derive as render_derive
from disagg_worker import platforms
from disagg_worker.engine.presets import PRESETS

# Devices the reference engine (torch, in the worker) runs on.
REFERENCE_DEVICES = ("cpu", "cuda")
# Longest child name: <name>-prefill-<i>; pod hostnames and Service names are DNS labels.
MAX_LABEL = 63
DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (camelCase path) and what to do."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidSpec(ValueError):
    """Raised by render when the spec has problems; carries them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))


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
    checks = (_backends, _lease, _tensor_parallel, _resources, _reference, _llmd, _ports)
    for check_fn in checks:
        problems += check_fn(spec)
    return problems


def _names(name: str, spec: DeploymentSpec) -> Iterator[Problem]:
    longest = f"{name}-prefill-{max(spec.prefill.replicas, spec.decode.replicas, 1) - 1}"
    if len(longest) > MAX_LABEL:
        yield Problem(
            "metadata.name",
            f"too long: pod name {longest!r} exceeds {MAX_LABEL} characters; "
            f"use a name of at most {MAX_LABEL - len(longest) + len(name)} characters",
        )
    if not DNS_LABEL.match(name):
        yield Problem(
            "metadata.name",
            f"{name!r} is not a DNS label: use lowercase letters, digits and '-', starting "
            "with a letter (child Service names and pod hostnames derive from it)",
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
                "(or register an out-of-tree platform with the worker)",
            )
            continue
        if r.kv_buffer_device is not None and r.kv_buffer_device not in platform.buffer_devices:
            yield Problem(
                f"spec.{role}.kvBufferDevice",
                f"{r.kv_buffer_device!r} is not supported on device {r.device!r}; use one of "
                f"{', '.join(platform.buffer_devices)} or omit it to derive it",
            )


def _backends(spec: DeploymentSpec) -> Iterator[Problem]:
    backends = spec.kv_transfer.backends
    if len(set(backends)) != len(backends):
        yield Problem("spec.kvTransfer.backends", "lists a backend twice; list each once")
    for role in ROLES:
        try:
            platforms.check_backends(list(backends), render_derive.buffer_device(spec, role))
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


def _tensor_parallel(spec: DeploymentSpec) -> Iterator[Problem]:
    p, d = spec.prefill.tensor_parallel_size, spec.decode.tensor_parallel_size
    if p > d:
        yield Problem(
            "spec.prefill.tensorParallelSize",
            f"{p} exceeds spec.decode.tensorParallelSize {d}; decode reads each prefill "
            "rank's KV, so lower prefill TP or raise decode TP",
        )
    elif d % p:
        yield Problem(
            "spec.decode.tensorParallelSize",
            f"{d} is not a multiple of spec.prefill.tensorParallelSize {p}; use {p * (d // p + 1)}",
        )


def _resources(spec: DeploymentSpec) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        resource = platforms.get_platform(r.device).gpu_resource
        limits = (r.resources.limits if r.resources else None) or {}
        for where in ("limits", "requests"):
            source = getattr(r.resources, where, None) or {}
            for key, value in source.items():
                try:
                    render_derive.parse_quantity(value)
                except ValueError as e:
                    yield Problem(f"spec.{role}.resources.{where}[{key}]", str(e))
        if resource is None or r.replicas == 0:
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
            "required when the routing sidecar is enabled, e.g. "
            "ghcr.io/llm-d/llm-d-routing-sidecar:v0.2.0",
        )


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
