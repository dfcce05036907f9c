"""Handshake keys: each deployment's side-channel HMAC key, derived from the operator's root key.

The operator never reads a Secret back (it holds no get/list/watch on Secrets): the key of
deployment ``<namespace>/<name>`` with uid ``<uid>`` is

    key = hex(HMAC-SHA256(root key, "<namespace>/<name>/<uid>"))     (64 hex characters)

so every sync can render the same Secret without knowing what is stored. The Secret is
written with ``create`` only, and only by a sync that creates pods (the pods
that mount it); 409 AlreadyExists means it is there, and its data is never rewritten: pods
read the key once at start, so rewriting it under running pods would split them into two
key generations that refuse each other's handshakes. A deleted Secret comes back with the
same key as long as the root key is the same. The uid makes a deployment deleted and
created again under the same name get a different key.

    derive(root, namespace, name, uid) -> str
    root_problem(root) -> str | None      why a root key is unusable, else None
    writes(desired, actions) -> actions   the plan's actions plus the Secret's create
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from typing import Any

from disagg_operator.api import kinds
from disagg_operator.planning.actions import Action

MIN_ROOT_BYTES = 32
SECRET_KIND = "Secret"


def derive(root: bytes, namespace: str, name: str, uid: str) -> str:
    """The handshake key of one deployment (64 hex characters)."""
    return hmac.new(root, f"{namespace}/{name}/{uid}".encode(), hashlib.sha256).hexdigest()


def root_problem(root: bytes) -> str | None:
    """Why ``root`` cannot be the root key (too short to be random enough), or None."""
    if len(root) < MIN_ROOT_BYTES:
        return (
            f"the root key holds {len(root)} bytes, fewer than {MIN_ROOT_BYTES}: put at least "
            f"{MIN_ROOT_BYTES} random bytes in it (e.g. `head -c 48 /dev/urandom | base64`)"
        )
    return None


def _creates_pods(actions: Sequence[Action]) -> bool:
    return any(a.kind in kinds.INSTANCE_KINDS and a.verb == "create" for a in actions)


def writes(desired: Sequence[dict[str, Any]], actions: Sequence[Action]) -> list[Action]:
    """``actions`` (planned without the Secret), preceded by a ``create`` of the rendered
    Secret when they create a pod; unchanged otherwise, so a steady state
    writes nothing."""
    secret = next((o for o in desired if o["kind"] == SECRET_KIND), None)
    if secret is None or not _creates_pods(actions):
        return list(actions)
    meta = secret["metadata"]
    create = Action(
        "create", SECRET_KIND, meta["name"], meta.get("namespace", ""), secret["apiVersion"], secret
    )
    return [create, *actions]


def without_secrets(objects: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``objects`` minus Secrets: what the planner compares with the observed children."""
    return [o for o in objects if o["kind"] != SECRET_KIND]
