"""The action planner: desired children vs observed children → the exact writes to make,
for every kind but Pods (the rollout planner, :mod:`disagg_operator.planning.rollout`,
decides those).

Level-triggered: the same two lists give the same plan whether we got here from a create,
an update, a resume or a child event, and no action when nothing differs is what makes a
steady state cost zero API writes. The rules: :func:`plan`; docs/operator.md (The plan).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from disagg_operator.api import kinds

Verb = Literal["create", "patch", "delete"]
_META_FIELDS = ("labels", "annotations", "ownerReferences")


@dataclass(frozen=True)
class Action:
    """One write. ``body``: the object (create) or the merge patch (patch)."""

    verb: Verb
    kind: str
    name: str
    namespace: str = ""
    api_version: str = ""
    body: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return f"{self.verb} {self.kind}/{self.name}"


def _ident(obj: Mapping[str, Any]) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def _action(verb: Verb, obj: Mapping[str, Any], body: Mapping[str, Any] | None) -> Action:
    meta = obj["metadata"]
    return Action(
        verb, obj["kind"], meta["name"], meta.get("namespace", ""), obj.get("apiVersion", ""), body
    )


def contains(observed: Any, desired: Any) -> bool:
    """Whether ``observed`` has every field of ``desired`` (lists: same length, item-wise)."""
    if isinstance(desired, Mapping):
        return isinstance(observed, Mapping) and all(
            key in observed and contains(observed[key], value) for key, value in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(observed, list)
            and len(observed) == len(desired)
            and all(contains(o, d) for o, d in zip(observed, desired, strict=True))
        )
    return bool(observed == desired)


def drift_patch(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that brings the managed fields of ``observed`` to ``desired``; {} if none."""
    patch: dict[str, Any] = {}
    meta_d, meta_o = desired.get("metadata", {}), observed.get("metadata", {})
    meta = {
        k: meta_d[k] for k in _META_FIELDS if k in meta_d and not contains(meta_o.get(k), meta_d[k])
    }
    if meta:
        patch["metadata"] = meta
    kind = kinds.child(desired["kind"])
    for key in kind.managed:
        if key not in desired:
            continue
        have = observed.get(key)
        alternatives = kind.exclusive.get(key, ())
        stale = {
            f: None
            for f in alternatives
            if isinstance(have, Mapping) and f in have and f not in desired[key]
        }
        if stale or not contains(have, desired[key]):
            patch[key] = {**desired[key], **stale} if stale else desired[key]
    return patch


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))


def plan(desired: list[dict[str, Any]], observed: list[dict[str, Any]]) -> list[Action]:
    """The actions that turn ``observed`` into ``desired``, per ``(kind, name)``: desired
    and not observed → create; observed but missing some desired field (a subset test, so
    fields the API server defaults never count; Secret data never rewritten) → a merge
    patch of the managed fields, which also removes (null) an observed field that excludes
    a desired one (``exclusive`` in :mod:`disagg_operator.api.kinds`); observed and not
    desired → delete; anything being deleted → nothing until it is gone. Creates and
    patches come in render order, then deletes. Instances (pods, LeaderWorkerSets) are
    refused: they are rolled, never patched."""
    if any(o["kind"] in kinds.INSTANCE_KINDS for o in (*desired, *observed)):
        raise ValueError("plan() takes no instances: rollout.planner decides them")
    seen = {_ident(o): o for o in observed}
    actions: list[Action] = []
    for want in desired:
        have = seen.get(_ident(want))
        if have is None:
            actions.append(_action("create", want, want))
        elif _deleting(have):
            continue
        else:
            patch = drift_patch(want, have)
            if patch:
                actions.append(_action("patch", want, patch))
    wanted = {_ident(w) for w in desired}
    for have in observed:
        if _ident(have) not in wanted and not _deleting(have):
            actions.append(_action("delete", have, None))
    return actions
