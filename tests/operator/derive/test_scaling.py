"""Scaling: each role's effective pod count (prefill following decode) and its checks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from disagg_operator.api import DeploymentSpec, PerDecode, RolloutStrategy
from disagg_operator.derive import scaling
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, role


def _spec(obj: dict[str, Any]) -> DeploymentSpec:
    dd, problems = validation.parse(obj)
    assert dd is not None and problems == [], problems
    return dd.spec


def _following(decode: int, **per_decode: Any) -> dict[str, Any]:
    return body(prefill={"device": "cpu", "perDecode": per_decode}, decode=role(replicas=decode))


def test_prefill_defaults_to_one_pod_when_neither_count_is_set() -> None:
    spec = _spec(body(prefill={"device": "cpu"}, decode=role(replicas=4)))
    assert spec.prefill.replicas is None
    assert scaling.effective_replicas(spec, "prefill") == 1
    assert scaling.effective_replicas(spec, "decode") == 4


def test_a_fixed_prefill_count_is_used_as_given() -> None:
    spec = _spec(body(prefill=role(replicas=3), decode=role(replicas=8)))
    assert scaling.effective_replicas(spec, "prefill") == 3


@pytest.mark.parametrize(
    ("decode", "per_decode", "prefill"),
    [
        (6, {"ratio": 0.5}, 3),
        (3, {"ratio": 0.5}, 2),  # rounded up
        (1, {"ratio": 0.1}, 1),  # any decode pod gets a prefill pod
        (10, {"ratio": 0.3}, 3),  # decimal, not binary: 10 * 0.3 is 3, not ceil(3.0000000000000004)
        (0, {"ratio": 0.5}, 0),  # follows decode to zero by default
        (0, {"ratio": 0.5, "min": 1}, 1),
        (2, {"ratio": 0.5, "min": 2}, 2),
        (20, {"ratio": 0.5, "max": 4}, 4),
        (4, {"ratio": 2}, 8),
    ],
)
def test_prefill_follows_decode(decode: int, per_decode: dict[str, Any], prefill: int) -> None:
    spec = _spec(_following(decode, **per_decode))
    assert scaling.effective_replicas(spec, "prefill") == prefill


@given(
    decode=st.integers(0, 500),
    ratio=st.sampled_from([0.1, 0.25, 0.3, 0.5, 1, 1.5, 3]),
    low=st.integers(0, 5),
    span=st.one_of(st.none(), st.integers(0, 20)),
)
def test_follow_stays_in_bounds_and_never_falls_as_decode_grows(
    decode: int, ratio: float, low: int, span: int | None
) -> None:
    per = PerDecode(ratio=ratio, min=low, max=None if span is None else max(low + span, 1))
    count = scaling.follow(decode, per)
    assert count >= low and (per.max_replicas is None or count <= per.max_replicas)
    assert scaling.follow(decode + 1, per) >= count
    if decode and per.max_replicas is None:
        assert count >= 1  # a decode pod always has a prefill pod to read KV from


def test_render_creates_the_followed_number_of_prefill_pods() -> None:
    pods = by_kind(render(_following(6, ratio=0.5), hmac_key="k"), "Pod")
    names = [p["metadata"]["name"] for p in pods]
    assert names == [f"demo-prefill-{i}" for i in range(3)] + [f"demo-decode-{i}" for i in range(6)]


def test_replicas_and_per_decode_together_are_refused_with_the_field() -> None:
    obj = body(prefill=role(replicas=2, perDecode={"ratio": 0.5}))
    problems = validation.parse(obj)[1]
    assert [p.field for p in problems] == ["spec.prefill.perDecode"]
    assert "not both" in problems[0].message and "spec.prefill.replicas" in problems[0].message


def test_min_above_max_is_refused_with_the_field() -> None:
    problems = validation.parse(_following(2, ratio=1, min=3, max=2))[1]
    assert [p.field for p in problems] == ["spec.prefill.perDecode.min"]
    assert "lower min or raise max" in problems[0].message


@pytest.mark.parametrize(
    ("per_decode", "field"),
    [
        ({"ratio": 0}, "spec.prefill.perDecode.ratio"),
        ({"ratio": 0.5, "max": 0}, "spec.prefill.perDecode.max"),
        ({"ratio": 0.5, "min": -1}, "spec.prefill.perDecode.min"),
        ({}, "spec.prefill.perDecode.ratio"),
    ],
)
def test_per_decode_schema_errors_name_the_field(per_decode: dict[str, Any], field: str) -> None:
    dd, problems = validation.parse(_following(2, **per_decode))
    assert dd is None and [p.field for p in problems] == [field]


@pytest.mark.parametrize("value", [-1, "25", "half", "-5%"])
def test_a_bad_disruption_budget_names_the_field_and_the_forms(value: Any) -> None:
    dd, problems = validation.parse(body(decode=role(disruptionBudget={"maxUnavailable": value})))
    assert dd is None
    assert [p.field for p in problems] == ["spec.decode.disruptionBudget.maxUnavailable"]
    assert "'25%'" in problems[0].message


def test_name_length_check_counts_followed_prefill_pods() -> None:
    # A rollout may use pod indices up to 2R + maxSurge - 1 (25% of R, rounded up), and a
    # 50-character name leaves four digits: 2000 decode -> 4000 prefill pods fit (top
    # index 8999), 2300 -> 4600 do not (10349).
    name = "n" * 50
    fits = _following(2000, ratio=2)
    fits["metadata"]["name"] = name
    assert validation.parse(fits)[1] == []
    too_many = _following(2300, ratio=2)
    too_many["metadata"]["name"] = name
    assert [p.field for p in validation.parse(too_many)[1]] == ["metadata.name"]


# --- spec.autoscaling: the planner's counts -----------------------------------------
AUTO: dict[str, Any] = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "pools"},
    "prefill": {"min": 2, "max": 5},
    "decode": {"min": 1, "max": 8},
}


def _autoscaled(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    obj = body(autoscaling=AUTO, monitoring={"enabled": True}, **spec)
    if status is not None:
        obj["status"] = status
    return obj


def test_before_a_first_plan_each_role_keeps_its_count_within_its_bounds() -> None:
    spec = _spec(_autoscaled(decode=role(replicas=20)))
    assert scaling.effective_replicas(spec, "prefill") == 2  # 1 by default, raised to min
    assert scaling.effective_replicas(spec, "decode") == 8  # lowered to max


def test_the_planned_counts_in_status_are_what_is_rendered() -> None:
    status = {"prefill": {"plannedReplicas": 4}, "decode": {"plannedReplicas": 3}}
    obj = _autoscaled(status, decode=role(replicas=1))
    spec = _spec(obj)
    assert [scaling.effective_replicas(spec, r) for r in ("prefill", "decode")] == [4, 3]
    names = [p["metadata"]["name"] for p in by_kind(render(obj, hmac_key="k"), "Pod")]
    assert names == [f"demo-prefill-{i}" for i in range(4)] + [f"demo-decode-{i}" for i in range(3)]
    assert obj["spec"]["decode"]["replicas"] == 1  # the spec itself is never rewritten


def test_planned_counts_are_ignored_without_autoscaling() -> None:
    obj = body(decode=role(replicas=2))
    obj["status"] = {"decode": {"plannedReplicas": 7}, "prefill": {"plannedReplicas": "x"}}
    assert scaling.effective_replicas(_spec(obj), "decode") == 2
    assert scaling.planned(obj["status"]) == {"decode": 7}  # a malformed count is no count


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prefill": {"perDecode": {"ratio": 0.5}}}, "spec.prefill.perDecode"),
        ({"monitoring": None}, "spec.monitoring"),
        ({"autoscaling": {**AUTO, "decode": {"min": 9, "max": 8}}}, "spec.autoscaling.decode.min"),
        (
            {"autoscaling": {**AUTO, "prefillPerDecode": {"min": 2, "max": 1}}},
            "spec.autoscaling.prefillPerDecode.min",
        ),
        ({"autoscaling": {**AUTO, "budget": {}}}, "spec.autoscaling.budget"),
        ({"autoscaling": {**AUTO, "budget": {"cost": 9}}}, "spec.autoscaling.prefill.cost"),
    ],
)
def test_autoscaling_conflicts_are_refused_with_the_field(
    change: dict[str, Any], field: str
) -> None:
    obj = _autoscaled()
    for key, value in change.items():
        if value is None:
            del obj["spec"][key]
        else:
            obj["spec"][key] = value
    problems = validation.parse(obj)[1]
    assert field in [p.field for p in problems], problems


def test_in_recommend_mode_the_plan_is_only_reported() -> None:
    status = {"prefill": {"plannedReplicas": 4}, "decode": {"plannedReplicas": 3}}
    obj = body(
        autoscaling={**AUTO, "mode": "Recommend"},
        monitoring={"enabled": True},
        prefill={"device": "cpu", "perDecode": {"ratio": 0.5}},
        decode=role(replicas=6),
    )
    obj["status"] = status
    spec = _spec(obj)  # perDecode allowed beside it
    assert [scaling.effective_replicas(spec, r) for r in ("prefill", "decode")] == [3, 6]


@pytest.mark.parametrize("replicas", [0, 1, 2, 3, 4, 5, 8, 13, 100])
def test_an_unset_max_surge_is_25_percent_or_the_room_of_a_one_revision_kv_roll(
    replicas: int,
) -> None:
    """Unset: a Deployment's 25% rounded up; where routers reach one KV revision at a
    time, the new revision's max(1, R - U) Ready pods beside the old one's R - U, never
    more than a second set."""
    unset = RolloutStrategy()
    base = scaling.surge(unset, replicas)
    wide = scaling.surge(unset, replicas, one_revision=True)
    unavailable = replicas // 4
    assert base == -(-replicas // 4)
    assert wide + unavailable >= max(1, replicas - unavailable) or replicas == 0
    assert base <= wide <= max(1, replicas)


def test_a_max_surge_that_is_set_is_kept_even_for_a_one_revision_kv_roll() -> None:
    one = RolloutStrategy(max_surge=1)
    assert scaling.surge(one, 8, one_revision=True) == scaling.surge(one, 8) == 1
    assert scaling.surge(RolloutStrategy(max_surge="50%"), 5, one_revision=True) == 3
