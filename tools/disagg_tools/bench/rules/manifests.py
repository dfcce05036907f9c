"""The DisaggregatedDeployments ``disagg bench operator`` creates.

One small reference-engine deployment on CPU pools, the shape every phase of the operator
benchmark uses (converge, latency, rollouts, failover).
"""

from __future__ import annotations

from typing import Any

from disagg_operator.api import API_VERSION, KIND


def deployment(
    name: str, namespace: str, *, prefill: int = 1, decode: int = 1, **spec: Any
) -> dict[str, Any]:
    """A deployment of ``prefill`` + ``decode`` pods; ``spec``: extra top-level fields."""

    def role(replicas: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "device": "cpu",
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        }

    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": "tiny",
            "engine": {"type": "reference", "image": "worker:bench"},
            "prefill": role(prefill),
            "decode": role(decode),
            **spec,
        },
    }
