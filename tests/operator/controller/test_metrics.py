"""The operator's per-deployment gauges, read from its cache at each scrape."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from disagg_operator.controller import metrics


class Source:
    """What the collector reads of the cache: deployment keys and bodies."""

    def __init__(self, bodies: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.bodies = bodies

    def deployments(self) -> list[tuple[str, str]]:
        return sorted(self.bodies)

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.bodies.get((namespace, name))


def _conditions(**given: tuple[str, str]) -> list[dict[str, str]]:
    return [{"type": t, "status": s, "reason": r} for t, (s, r) in given.items()]


def test_each_deployment_reports_its_pods_conditions_rollout_and_path() -> None:
    rolling = {
        "status": {
            "prefill": {"desired": 2, "ready": 1, "updated": 1},
            "decode": {"desired": 4, "ready": 4, "updated": 2, "plannedReplicas": 5},
            "conditions": _conditions(
                Ready=("False", "ReplicasNotReady"),
                Progressing=("True", "NewKVRevision"),
                TransferPathReady=("True", "CanaryPassing"),
            ),
        }
    }
    settled = {"status": {"conditions": _conditions(Progressing=("False", "RolloutComplete"))}}
    source = Source({("a", "roll"): rolling, ("a", "calm"): settled})
    registry = CollectorRegistry()
    collector = metrics.register_deployments(source, registry)
    text = generate_latest(registry).decode()
    roll = 'deployment="roll",namespace="a"'
    assert f'disagg_deployment_replicas{{{roll},role="decode",state="updated"}} 2.0' in text
    assert f'disagg_deployment_condition{{{roll},status="False",type="Ready"}} 1.0' in text
    assert f'disagg_deployment_condition{{{roll},status="True",type="Ready"}} 0.0' in text
    assert 'disagg_deployment_rollout_in_progress{deployment="roll",namespace="a"} 1.0' in text
    assert 'disagg_deployment_rollout_in_progress{deployment="calm",namespace="a"} 0.0' in text
    assert 'disagg_deployment_transfer_path_ready{deployment="roll",namespace="a"} 1.0' in text
    assert 'disagg_deployment_transfer_path_ready{deployment="calm",namespace="a"} 0.0' in text
    assert f'disagg_deployment_planned_replicas{{{roll},role="decode"}} 5.0' in text
    assert 'planned_replicas{deployment="roll",namespace="a",role="prefill"}' not in text
    del source.bodies[("a", "calm")]  # deleted: its series end with it
    assert 'deployment="calm"' not in generate_latest(registry).decode()
    metrics.unregister(collector, registry)
    assert "disagg_deployment" not in generate_latest(registry).decode()
