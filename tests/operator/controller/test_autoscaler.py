"""The autoscaler's pure parts: the PromQL it asks, durations, the rollout hold, and the
profile ConfigMap's faults (each naming the ConfigMap and the fix)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_operator.controller.autoscaler import Autoscaler, _held_for_rollout, queries, seconds
from disagg_operator.engines.reference.engine import Reference
from disagg_operator.planning.autoscale import Decision
from disagg_operator.validation import spec as validation
from tests.operator.builders import body


def test_durations_are_read_as_prometheus_writes_them() -> None:
    assert seconds("30s") == 30 and seconds("1m30s") == 90 and seconds("1h") == 3600
    assert seconds("500ms") == 0.5 and seconds("2m") == 120


def test_the_queries_read_the_podmonitors_jobs_over_four_scrapes() -> None:
    got = queries(Reference.demand, "team-a", "demo", "30s")
    assert got["prompt"] == (
        'sum(rate(disagg_prompt_tokens_total{job="team-a/demo-prefill"}[120s]))'
    )
    assert got["output"] == (
        'sum(rate(disagg_generation_tokens_total{job="team-a/demo-decode"}[120s]))'
    )
    assert got["busy_decode"] == 'sum by (pod) (disagg_requests_running{job="team-a/demo-decode"})'
    assert got["waiting_prefill"] == 'sum(disagg_requests_waiting{job="team-a/demo-prefill"})'
    assert got["requests_decode"] == (
        'sum(rate(disagg_requests_total{job="team-a/demo-decode"}[120s]))'
    )
    assert queries(Reference.demand, "a", "b", "1s")["prompt"].endswith("[4s]))")


def _decision(prefill: int, decode: int) -> Decision:
    return Decision({"prefill": prefill, "decode": decode}, {}, {}, "ScaleDown", "m")


def test_no_role_shrinks_while_pods_are_replaced() -> None:
    rolling = {"prefill": {"currentRevision": "a", "updateRevision": "b"}, "decode": {}}
    current = {"prefill": 3, "decode": 3}
    held = _held_for_rollout(_decision(1, 4), current, rolling)
    assert held.replicas == {"prefill": 3, "decode": 4} and held.reason == "RolloutInProgress"
    kv = {"kvRevision": "new", "routedKvRevision": "old"}
    assert _held_for_rollout(_decision(1, 3), current, kv).replicas["prefill"] == 3
    settled = {"prefill": {"currentRevision": "a", "updateRevision": "a"}, "kvRevision": "k",
               "routedKvRevision": "k"}  # fmt: skip
    assert _held_for_rollout(_decision(1, 3), current, settled).replicas["prefill"] == 1


class ConfigMaps:
    """The one API read the profile needs (a GET of a ConfigMap)."""

    def __init__(self, data: dict[str, str] | None) -> None:
        self.data = data

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Any:
        return None if self.data is None else {"data": self.data}


AUTO = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "pools"},
    "prefill": {"max": 4},
    "decode": {"max": 4},
}
GOOD = {
    "prefill": {"curve": [[1000, 0.2]], "start_s": 1},
    "decode": {"curve": [[1, 0.01]], "start_s": 1},
}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (None, "ConfigMap team-a/pools key profile.json is missing; create it from"),
        ({"profile.json": "{"}, "ConfigMap team-a/pools key profile.json: not JSON"),
        ({"profile.json": "[]"}, "want the object disagg bench profile writes"),
        ({"profile.json": json.dumps({**GOOD, "percentile": 99})}, "was measured at p99"),
        ({"profile.json": json.dumps({"prefill": GOOD["prefill"]})}, "decode: missing"),
    ],
)
async def test_a_bad_profile_names_the_configmap_and_the_fix(
    data: dict[str, str] | None, said: str
) -> None:
    dd, problems = validation.parse(body(autoscaling=AUTO, monitoring={"enabled": True}))
    assert dd is not None and not problems
    scaler = Autoscaler(ConfigMaps(data), None, lambda ns, n: None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=said):
        await scaler._profile("team-a", dd.spec)
    if data is None:
        ok = Autoscaler(ConfigMaps({"profile.json": json.dumps(GOOD)}), None, lambda ns, n: None)  # type: ignore[arg-type]
        assert set(await ok._profile("team-a", dd.spec)) == {"prefill", "decode"}
