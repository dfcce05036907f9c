"""The KV-compatibility key: the fields that decide whether a decode can read a prefill's KV.

Two pods can pair only when their deployment's key is equal; a spec change that keeps it
rolls each role in place, a change of it starts a new *KV revision* (:func:`kv_revision`, a
pod label) that routing never pairs with another. The inputs come from the engine
(:meth:`Engine.version_key`, :attr:`Engine.kv_flags`, :attr:`Engine.kv_env`), so only the
engine says which of its flags change the KV. A sync computes the revision once and passes
it on (render, the canary, the rollout planner). The inputs: docs/operator.md (Rollouts).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from disagg_operator.api import KV_REVISION_CHARS, ROLES, DeploymentSpec, RoleSpec
from disagg_operator.derive import transfer
from disagg_operator.engines.base import flag_values
from disagg_operator.engines.settings import Settings


def _env_values(role: RoleSpec, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for entry in role.env or []:
        if entry.name in names:
            out[entry.name] = entry.value if entry.value is not None else entry.value_from
    return out


def kv_key(spec: DeploymentSpec, settings: Settings) -> dict[str, Any]:
    """The KV-compatibility key of a validated spec, as plain JSON-able data."""
    engine = settings.engine(spec)
    roles = {
        r: {
            "tensorParallelSize": spec.role(r).tensor_parallel_size,
            "bufferDevice": transfer.buffer_device(spec, r, settings.platforms),
            "args": flag_values(spec.role(r).args, engine.kv_flags),
            "env": _env_values(spec.role(r), engine.kv_env),
        }
        for r in ROLES
    }
    key = {
        "model": spec.model,
        "engine": spec.engine.type,
        "engineVersion": engine.version_key(spec),
        # what the engine says does not change the KV (vLLM: the weights' size) is not in it
        "modelConfig": spec.model_spec.model_dump(
            by_alias=True, exclude_none=True, exclude=set(engine.not_kv)
        ),
        "connector": spec.kv_transfer.connector,
        "backends": list(spec.kv_transfer.backends),
        "roles": roles,
    }
    # push and pull pools never transfer to each other: a mode change is a new revision.
    # Pull, the default, adds nothing, so the keys of specs without the field stay as they were.
    if spec.kv_transfer.mode != "pull":
        key["mode"] = spec.kv_transfer.mode
    return key


def digest(data: Any, chars: int = KV_REVISION_CHARS) -> str:
    """A short stable hash of JSON-able ``data`` (a label value: hex, ≤ 63 characters)."""
    blob = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:chars]


def kv_revision(spec: DeploymentSpec, settings: Settings) -> str:
    """The KV revision label of every pod this spec renders."""
    return digest(kv_key(spec, settings))


@dataclass(frozen=True)
class Revisions:
    """The KV revisions one render names: ``target``, the spec's own (:func:`kv_revision`);
    ``routed``, what the role Services and the InferencePool select (None: ``target``);
    ``serving``, what a revision-aware router pairs within (empty: ``target`` alone)."""

    target: str
    routed: str | None = None
    serving: Sequence[str] = ()
