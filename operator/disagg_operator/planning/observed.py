"""One sync's observation of a deployment: what the planner and the status read.

Planning layer, a plain value. The controller's sync builds it from the watch-fed cache
and what the canary watch and the autoscaler last heard, once before its writes and once
after them (``dataclasses.replace``); :func:`~disagg_operator.planning.decide.decide` and
:func:`~disagg_operator.planning.status.compute` take it whole instead of a dozen keywords.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from disagg_operator.planning.transfer_path import Said


@dataclass(frozen=True)
class Observed:
    """Deployment ``name`` as one sync sees it at ``now``.

    ``pods``: its instances (Pods, or the LeaderWorkerSet standing for each group);
    ``generation``: ``metadata.generation`` of the body read; ``previous``: the status
    stored now (lastTransitionTime moves only when a condition's status flips);
    ``group_pods``: the pods of its LeaderWorkerSet groups; ``routed``: the KV revision its
    routing objects select (None: none does); ``router``: its router Deployment (None: not
    there); ``busy``: requests in flight by pod name as the autoscaler last read them
    (None: never read; a scale-down takes the least busy first); ``canary_said``: what
    the transfer canaries answered, by pod name (None: none asked).
    """

    name: str
    now: datetime
    pods: Sequence[dict[str, Any]] = ()
    generation: int | None = None
    previous: dict[str, Any] | None = None
    group_pods: Sequence[dict[str, Any]] = ()
    routed: str | None = None
    router: Mapping[str, Any] | None = None
    busy: Mapping[str, float] | None = None
    canary_said: Mapping[str, Said] | None = None
