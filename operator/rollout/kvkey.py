"""The KV-compatibility key: the fields that decide whether a decode can read a prefill's KV.

Pure layer. Two pods can pair only when their deployment's key is equal: the same model
and engine (version included), the same KV shape (dtype, KV-cache dtype, block size,
tensor parallelism of both roles, KV layout or attention backend), the same buffer device
per role and the same NIXL backends. A spec change that keeps the key rolls each role in
place; a change of the key starts a new *KV revision* (:func:`kv_revision`, a pod label):
routing never pairs pods of different revisions (see :mod:`.planner`).

Inputs, by engine (one table, :data:`VLLM_FLAGS` / :data:`VLLM_ENV` / :data:`REFERENCE_ENV`):

- both: ``model``, ``engine.type``, the engine version (vLLM: the resolved version, else
  every engine image; reference: every engine image, whose worker fixes the cache layout),
  each role's ``tensorParallelSize`` and buffer device (derived when omitted),
  ``kvTransfer.connector`` and ``backends``, ``modelConfig``;
- vLLM: the values of the flags in :data:`VLLM_FLAGS` and env names in :data:`VLLM_ENV`
  found in each role's ``args`` / ``env``;
- reference: the env names in :data:`REFERENCE_ENV` (block size, preset seed).

Everything else (resources, placement, images of the same vLLM version, leases, UCX
settings, extra env) is not in the key: changing it rolls pods in place.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from disagg_operator.engines import vllm
from disagg_operator.models import ROLES, DeploymentSpec, RoleSpec
from disagg_operator.render import derive
from disagg_worker.config import WorkerConfig

# vLLM flags whose value changes the KV a prefill writes or a decode expects.
VLLM_FLAGS = (
    "--dtype",
    "--kv-cache-dtype",
    "--block-size",
    "--attention-backend",
)
# vLLM env that changes the KV layout or the attention backend (part of its handshake hash).
VLLM_ENV = ("VLLM_ATTENTION_BACKEND", "VLLM_KV_CACHE_LAYOUT")
# Reference engine env that changes the KV blocks (WorkerConfig fields, by env name).
REFERENCE_ENV = tuple(WorkerConfig.env_name(f) for f in ("block_size", "seed", "model"))
KV_REVISION_CHARS = 10


def _flag_values(args: list[str] | None, flags: tuple[str, ...]) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` forms; the last one wins (as argparse does)."""
    found: dict[str, str] = {}
    items = list(args or [])
    for n, item in enumerate(items):
        name, eq, value = item.partition("=")
        if name in flags:
            if eq:
                found[name] = value
            elif n + 1 < len(items):
                found[name] = items[n + 1]
    return found


def _env_values(role: RoleSpec, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in role.env or []:
        if entry.name in names:
            out[entry.name] = entry.value if entry.value is not None else entry.value_from
    return out


def _engine_version(spec: DeploymentSpec) -> Any:
    if spec.engine.type == "vllm":
        found = derive.resolution(spec)
        if found.version is not None:
            return vllm.format_version(found.version)
    return sorted({spec.role(r).image or spec.engine.image for r in ROLES})


def kv_key(spec: DeploymentSpec) -> dict[str, Any]:
    """The KV-compatibility key of a validated spec, as plain JSON-able data."""
    flags, env = (VLLM_FLAGS, VLLM_ENV) if spec.engine.type == "vllm" else ((), REFERENCE_ENV)
    roles = {
        r: {
            "tensorParallelSize": spec.role(r).tensor_parallel_size,
            "bufferDevice": derive.buffer_device(spec, r),
            "args": _flag_values(spec.role(r).args, flags),
            "env": _env_values(spec.role(r), env),
        }
        for r in ROLES
    }
    return {
        "model": spec.model,
        "engine": spec.engine.type,
        "engineVersion": _engine_version(spec),
        "modelConfig": spec.model_spec.model_dump(by_alias=True, exclude_none=True),
        "connector": spec.kv_transfer.connector,
        "backends": list(spec.kv_transfer.backends),
        "roles": roles,
    }


def digest(data: Any, chars: int = KV_REVISION_CHARS) -> str:
    """A short stable hash of JSON-able ``data`` (a label value: hex, ≤ 63 characters)."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:chars]


# The last few (spec, revision) pairs: one sync asks for the revision of one parsed spec
# a dozen times (every pod it renders, the routing objects, the canary's URL). A memo by
# identity: parsed specs are never mutated.
_RECENT: list[tuple[DeploymentSpec, str]] = []


def kv_revision(spec: DeploymentSpec) -> str:
    """The KV revision label of every pod this spec renders."""
    for known, revision in _RECENT:
        if known is spec:
            return revision
    revision = digest(kv_key(spec))
    _RECENT.insert(0, (spec, revision))
    del _RECENT[8:]
    return revision
