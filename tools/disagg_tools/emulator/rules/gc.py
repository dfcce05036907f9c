"""Garbage collection by owner reference, decided as kube-controller-manager's garbage
collector decides it (kubernetes/kubernetes v1.36, pkg/controller/garbagecollector/
garbagecollector.go: ``classifyReferences``, ``attemptToDeleteItem``,
``processDeletingDependentsItem``, ``orphanDependents``).

Pure: each verdict reads one object and a lookup of live objects by owner reference; the
emulator's store acts on it (:mod:`disagg_tools.emulator.store`). A reference is
*dangling* when no live object of its kind and name has its uid, *waiting* when its owner
is being deleted in the foreground, else *solid*.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

Policy = Literal["Background", "Foreground", "Orphan"]
FOREGROUND = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
ORPHAN = "orphan"  # metav1.FinalizerOrphanDependents
# (apiVersion, kind, namespace, name) → the live object, or None
Lookup = Callable[[str, str, str, str], Mapping[str, Any] | None]


class Verdict(NamedTuple):
    """What the collector does to one object: keep it, delete it with ``policy``, or drop
    the references to ``unref`` (uids) from it."""

    action: Literal["keep", "delete", "unref"]
    policy: Policy = "Background"
    unref: tuple[str, ...] = ()


def refs(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The object's owner references."""
    found: list[Mapping[str, Any]] = (obj.get("metadata") or {}).get("ownerReferences") or []
    return found


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    found: list[str] = (obj.get("metadata") or {}).get("finalizers") or []
    return found


def deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def deleting_dependents(obj: Mapping[str, Any]) -> bool:
    """Being deleted in the foreground: it waits for its blocking dependents."""
    return deleting(obj) and FOREGROUND in finalizers(obj)


def classify(
    obj: Mapping[str, Any], lookup: Lookup
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(solid, dangling, waiting) references of ``obj``: an owner looked up by kind and
    name in the object's namespace counts only with the reference's uid."""
    namespace = str((obj.get("metadata") or {}).get("namespace") or "")
    solid, dangling, waiting = [], [], []
    for ref in refs(obj):
        owner = lookup(str(ref.get("apiVersion")), str(ref.get("kind")), namespace, ref["name"])
        if owner is None or (owner.get("metadata") or {}).get("uid") != ref.get("uid"):
            dangling.append(ref)
        elif deleting_dependents(owner):
            waiting.append(ref)
        else:
            solid.append(ref)
    return solid, dangling, waiting


def verdict(obj: Mapping[str, Any], lookup: Lookup, has_dependents: bool) -> Verdict:
    """``attemptToDeleteItem`` for a live object with owner references: kept while one
    owner is solid (its dangling and waiting references dropped); deleted in the
    foreground when an owner waits for it and it has dependents of its own; else deleted
    with the policy its own finalizers ask for (orphan, foreground) or in the background."""
    if not refs(obj) or (deleting(obj) and not deleting_dependents(obj)):
        return Verdict("keep")
    solid, dangling, waiting = classify(obj, lookup)
    if solid:
        gone = tuple(str(r.get("uid")) for r in (*dangling, *waiting))
        return Verdict("unref", unref=gone) if gone else Verdict("keep")
    if waiting and has_dependents:
        return Verdict("delete", "Foreground")
    if ORPHAN in finalizers(obj):
        return Verdict("delete", "Orphan")
    if FOREGROUND in finalizers(obj):
        return Verdict("delete", "Foreground")
    return Verdict("delete", "Background")


def blocking(dependents: Sequence[Mapping[str, Any]], owner_uid: str) -> list[Mapping[str, Any]]:
    """The dependents a foreground deletion of ``owner_uid`` waits for: those whose
    reference to it sets ``blockOwnerDeletion``."""
    return [
        d
        for d in dependents
        if any(r.get("uid") == owner_uid and r.get("blockOwnerDeletion") for r in refs(d))
    ]


def without_refs(obj: Mapping[str, Any], uids: tuple[str, ...]) -> dict[str, Any]:
    """``obj`` with its references to ``uids`` removed (how the collector orphans it)."""
    meta = dict(obj.get("metadata") or {})
    kept = [r for r in refs(obj) if r.get("uid") not in uids]
    if kept:
        meta["ownerReferences"] = kept
    else:
        meta.pop("ownerReferences", None)
    return {**obj, "metadata": meta}


POLICIES: tuple[Policy, ...] = ("Foreground", "Background", "Orphan")


def delete_policy(options: Any, params: Mapping[str, str]) -> Policy:
    """The propagation policy of a DELETE: DeleteOptions' ``propagationPolicy`` (body or
    query), else the deprecated ``orphanDependents``, else Background (the default for
    custom resources and the kinds the operator writes). ValueError: what the API server
    answers 422 for, in its words (apimachinery ValidateDeleteOptions)."""
    options = options if isinstance(options, Mapping) else {}
    policy = options.get("propagationPolicy") or params.get("propagationPolicy")
    orphan = options.get("orphanDependents", params.get("orphanDependents"))
    if policy is not None and orphan is not None:
        raise ValueError(
            "propagationPolicy: Invalid value: orphanDependents and deletionPropagation "
            "cannot be both set"
        )
    if policy is not None:
        if policy not in POLICIES:
            supported = ", ".join(f'"{p}"' for p in POLICIES)
            raise ValueError(
                f'propagationPolicy: Unsupported value: "{policy}": supported values: {supported}'
            )
        return policy
    return "Orphan" if orphan in (True, "true") else "Background"
