"""Platforms file: extra accelerators declared as data, turned into :class:`Platform` objects.

Parses and validates a document, never reads a file or touches the registry.
The operator (``disagg operator --platforms-file``, fed by the chart's ``platforms`` value)
and ``disagg render --platforms-file`` read the file and register what this returns, so an
hpu pool or a second ROCm flavour needs no code.

The document is a YAML (or JSON) list, one mapping per platform::

    - name: hpu                            # the value of spec.<role>.device
      bufferDevices: [hpu, cpu]            # kv_buffer_device values, native first
      acceleratorResource: habana.ai/gaudi # extended resource the pods must request
      ucxTls: tcp,self                     # derived UCX_TLS (default tcp,self)
      backends: [UCX]                      # NIXL backends usable (default: any)
      engineDevice: hpu                    # vLLM's device type (default: name)
      acceleratorMemoryLabel: habana.ai/memory  # node label: one device's memory in MiB
      overrides: false                     # true to replace a built-in of the same name

Memory types follow the buffer device: ``cpu`` registers as DRAM, any other as VRAM.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from disagg_contract import ucx
from disagg_contract.platforms import (
    BACKEND_MEMORY,
    BUILTIN_NAMES,
    LOCAL_ONLY_TEXT,
    Platform,
    reaches_peer,
)
from disagg_contract.problems import Problem

ROOT = "platforms"
DEFAULT_UCX_TLS = "tcp,self"
KEYS = (
    "name",
    "bufferDevices",
    "acceleratorResource",
    "ucxTls",
    "backends",
    "engineDevice",
    "acceleratorMemoryLabel",
    "overrides",
)
# Lowercase DNS-label-like names: device names appear in pod env and docs tables.
_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
_TOKEN = re.compile(r"^[a-z][a-z0-9_]*$")
# Extended resources are domain-qualified (kubernetes.io is reserved for built-ins).
_RESOURCE = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_LABEL = re.compile(r"^([a-z0-9]([a-z0-9.-]*[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
# Transports that need CAP_SYS_PTRACE or an IPC namespace shared between pods.
UNSAFE_TLS = ucx.needs_privilege()


class PlatformFileError(ValueError):
    """Every problem of a platforms document, one ``field: message`` per line."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


def parse(text: str, builtin: frozenset[str] = BUILTIN_NAMES) -> list[Platform]:
    """The platforms a YAML/JSON document declares; raise PlatformFileError otherwise."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise PlatformFileError([Problem(ROOT, f"not YAML or JSON: {e}")]) from None
    return from_document(doc, builtin)


def from_document(doc: Any, builtin: frozenset[str] = BUILTIN_NAMES) -> list[Platform]:
    """Validated platforms of an already-parsed document (None or [] declares none)."""
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise PlatformFileError(
            [Problem(ROOT, f"must be a list of platforms, got {type(doc).__name__}")]
        )
    problems: list[Problem] = []
    out: list[Platform] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc):
        where = f"{ROOT}[{i}]"
        found = list(_entry(where, entry, builtin))
        problems += found
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name in seen:
            problems.append(Problem(f"{where}.name", f"{name!r} is declared twice; keep one"))
        if isinstance(name, str):
            seen.add(name)
        if not found:
            out.append(_platform(entry))
    if problems:
        raise PlatformFileError(problems)
    return out


def _platform(entry: dict[str, Any]) -> Platform:
    return Platform(
        name=entry["name"],
        buffer_devices=tuple(entry["bufferDevices"]),
        accelerator_resource=entry.get("acceleratorResource"),
        ucx_tls=entry.get("ucxTls") or DEFAULT_UCX_TLS,
        backends=tuple(entry.get("backends") or ()),
        engine_device=entry.get("engineDevice"),
        memory_label=entry.get("acceleratorMemoryLabel"),
        note="declared in the platforms file",
    )


def _entry(where: str, entry: Any, builtin: frozenset[str]) -> list[Problem]:
    if not isinstance(entry, dict):
        return [Problem(where, f"must be a mapping with {', '.join(KEYS)}")]
    problems = [
        Problem(f"{where}.{key}", f"unknown key; known keys: {', '.join(KEYS)}")
        for key in entry
        if key not in KEYS
    ]
    problems += _name(where, entry, builtin)
    problems += _buffers(where, entry.get("bufferDevices"))
    problems += _resource(where, entry.get("acceleratorResource"))
    problems += _ucx_tls(where, entry.get("ucxTls"))
    problems += _backends(where, entry.get("backends"))
    engine = entry.get("engineDevice")
    if engine is not None and not (isinstance(engine, str) and _TOKEN.match(engine)):
        problems.append(
            Problem(f"{where}.engineDevice", f"{engine!r} is not a device type such as cuda")
        )
    label = entry.get("acceleratorMemoryLabel")
    if label is not None and not (isinstance(label, str) and _LABEL.match(label)):
        problems.append(
            Problem(
                f"{where}.acceleratorMemoryLabel",
                f"{label!r} is not a node label key such as nvidia.com/gpu.memory",
            )
        )
    return problems


def _name(where: str, entry: dict[str, Any], builtin: frozenset[str]) -> list[Problem]:
    name, overrides = entry.get("name"), entry.get("overrides", False)
    field = f"{where}.name"
    if not isinstance(overrides, bool):
        return [Problem(f"{where}.overrides", f"{overrides!r} must be true or false")]
    if name is None:
        return [Problem(field, "required: the device name pools set in spec.<role>.device")]
    if not isinstance(name, str) or not _NAME.match(name):
        return [
            Problem(
                field,
                f"{name!r} is not a device name: lowercase letters, digits and '-', "
                "starting with a letter, at most 31 characters",
            )
        ]
    if name in builtin and not overrides:
        return [
            Problem(
                field,
                f"{name!r} is a built-in platform; set overrides: true to replace it, "
                "or choose another name",
            )
        ]
    if overrides and name not in builtin:
        return [
            Problem(
                f"{where}.overrides",
                f"{name!r} is not a built-in platform ({', '.join(sorted(builtin))}); "
                "remove overrides",
            )
        ]
    return []


def _strings(field: str, value: Any, what: str, pattern: re.Pattern[str]) -> list[Problem]:
    """Problems of a non-empty list of distinct names matching ``pattern``."""
    if not isinstance(value, list) or not value:
        return [Problem(field, f"must be a non-empty list of {what}")]
    bad = [v for v in value if not (isinstance(v, str) and pattern.match(v))]
    if bad:
        return [Problem(field, f"{bad[0]!r} is not a valid entry; list {what}")]
    if len(set(value)) != len(value):
        return [Problem(field, "lists a value twice; list each once")]
    return []


def _buffers(where: str, value: Any) -> list[Problem]:
    field = f"{where}.bufferDevices"
    if value is None:
        return [Problem(field, "required: kv_buffer_device values, native first, e.g. [hpu, cpu]")]
    return _strings(field, value, "buffer devices (native first, e.g. [hpu, cpu])", _TOKEN)


def _resource(where: str, value: Any) -> list[Problem]:
    if value is None:
        return []
    if not isinstance(value, str) or not _RESOURCE.match(value) or "kubernetes.io/" in value:
        return [
            Problem(
                f"{where}.acceleratorResource",
                f"{value!r} is not an extended resource name such as habana.ai/gaudi "
                "or amd.com/gpu (omit it for devices without one)",
            )
        ]
    return []


def _ucx_tls(where: str, value: Any) -> list[Problem]:
    field = f"{where}.ucxTls"
    if value is None:
        return []
    parts = value.split(",") if isinstance(value, str) else []
    if not parts or not all(_TOKEN.match(p) for p in parts):
        return [Problem(field, f"{value!r} is not a comma-separated transport list, e.g. tcp,self")]
    unsafe = sorted(UNSAFE_TLS.intersection(parts))
    if unsafe:
        return [
            Problem(
                field,
                f"transports {', '.join(unsafe)} need CAP_SYS_PTRACE or an IPC namespace "
                "shared between pods; remove them (a deployment can still opt in with "
                "kvTransfer.ucxTls)",
            )
        ]
    return []


def _backends(where: str, value: Any) -> list[Problem]:
    if value is None:
        return []
    field = f"{where}.backends"
    problems = _strings(field, value, "NIXL backends (e.g. [UCX])", re.compile(r"^\w+$"))
    if problems:
        return problems
    unknown = [b for b in value if b not in BACKEND_MEMORY]
    if unknown:
        return [
            Problem(
                field,
                f"unknown NIXL backend {unknown[0]!r}; known: {', '.join(sorted(BACKEND_MEMORY))}",
            )
        ]
    if not reaches_peer(value):  # no pool of this platform could ever move KV between pods
        return [Problem(field, f"{LOCAL_ONLY_TEXT} (found: {', '.join(value)})")]
    return []
