"""Every CEL rule of the CRD, evaluated with cel-python against good and bad objects."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import celpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disagg_operator import api as models
from disagg_operator.engines.reference import engine as reference_engine
from disagg_operator.engines.settings import BUILTIN_ENGINES, DEFAULT
from disagg_operator.engines.vllm import engine as vllm_engine
from disagg_operator.render import crd
from disagg_operator.validation import spec as validation
from tests.operator.builders import EXAMPLES, body, example, role, vllm_gpu_cpu

SCHEMA = crd.build()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _rules(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    """(object path below the root, rule) for every x-kubernetes-validations entry; a
    ``[]`` step is every item of a list."""
    if not isinstance(node, dict):
        return
    for rule in node.get("x-kubernetes-validations", []):
        yield path, rule["rule"]
    for name, prop in (node.get("properties") or {}).items():
        yield from _rules(prop, (*path, name))
    if "items" in node:
        yield from _rules(node["items"], (*path, "[]"))


RULES = list(_rules(SCHEMA))
# The API's own rules and each built-in engine's (the CRD generator adds those to the spec's).
ALL_RULES = [*models.CEL_RULES, *(r for e in BUILTIN_ENGINES.values() for r in e.cel_rules)]


def _defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as admission sees it: schema defaults applied (pydantic applies the same)."""
    spec = DEFAULT.spec_model.model_validate(obj["spec"])
    return {**obj, "spec": spec.model_dump(by_alias=True, exclude_none=True, mode="json")}


def _at(path: tuple[str, ...], obj: Any) -> Any:
    for key in path:
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _holds(
    rule: str, path: tuple[str, ...], obj: dict[str, Any], old: dict[str, Any] | None = None
) -> bool:
    """Whether ``rule`` holds; a rule on an absent object does not run (as in admission),
    nor does a transition rule (one that reads ``oldSelf``) on a create (``old`` None)."""
    target: Any = obj
    for n, key in enumerate(path):
        if key == "[]":
            return all(_holds(rule, path[n + 1 :], item) for item in target)
        if not isinstance(target, dict) or key not in target:
            return True
        target = target[key]
    bound = {"self": celpy.json_to_cel(target)}
    if "oldSelf" in rule:
        before = None if old is None else _at(path, old)
        if before is None:
            return True
        bound["oldSelf"] = celpy.json_to_cel(before)
    env = celpy.Environment()
    program = env.program(env.compile(rule))
    return bool(program.evaluate(bound))


def _failing(obj: dict[str, Any], old: dict[str, Any] | None = None) -> set[str]:
    data = _defaulted(obj)
    before = None if old is None else _defaulted(old)
    return {rule for path, rule in RULES if not _holds(rule, path, data, before)}


def test_the_crd_carries_every_model_rule() -> None:
    # a rule of a shared shape (an env var of either role) sits at each place it is used
    assert {r for _, r in RULES} == {r for r, _ in ALL_RULES}
    assert len(ALL_RULES) == len({r for r, _ in ALL_RULES})


@pytest.mark.parametrize(
    "path", [*EXAMPLES, *(EXAMPLES[0].parent / "autoscaling").glob("[ds]*.yaml")], ids=str
)
def test_examples_satisfy_every_rule(path: Any) -> None:
    assert _failing(example(path)) == set()


AUTO: dict[str, Any] = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "pools"},
    "prefill": {"max": 4},
    "decode": {"max": 8},
}
MONITORED = {"enabled": True}


def _auto(**change: Any) -> dict[str, Any]:
    return body(autoscaling={**AUTO, **change}, monitoring=MONITORED)


GOOD = [
    body(),
    body(prefill=role(tensorParallelSize=2)),  # the reference engine: any pair it splits
    body(prefill=role(tensorParallelSize=4), decode=role(tensorParallelSize=1)),
    body(engine="vllm", prefill=role(tensorParallelSize=2), decode=role(tensorParallelSize=4)),
    body(
        engine="vllm",
        prefill=role(tensorParallelSize=4),
        decode=role(tensorParallelSize=2),
        modelConfig={"numKeyValueHeads": 8},
    ),
    body(
        engine="vllm",
        decode=role(resources={"requests": {"cpu": "2"}, "limits": {"memory": "8Gi"}}),
    ),
    body(llmd={"enabled": True, "routingSidecar": {"enabled": True, "image": "x:1"}}),
    body(kvTransfer={"backends": ["UCX", "LIBFABRIC"]}),
    body(kvTransfer={"backends": ["GDS", "UCX"]}),
    body(kvTransfer={"ucxTls": "tcp,cma,self"}),
    body(kvTransfer={"ucxTls": "^cma"}),
    body(kvTransfer={"ucxTls": "rc_x,sm"}),
    body(prefill={"device": "cpu", "perDecode": {"ratio": 0.5}}),
    body(prefill={"device": "cpu", "perDecode": {"ratio": 0.5, "min": 2, "max": 2}}),
    body(decode=role(disruptionBudget={"maxUnavailable": "25%"}, topologySpreadConstraints=[])),
    body(autoscaling=AUTO, monitoring={"enabled": True}),
    body(gangScheduling={"scheduler": "Kueue", "queue": "gpu"}),
    body(gangScheduling={"scheduler": "Volcano"}),
    body(placement={"group": {"topologyKey": "rack"}}),
    body(
        placement={"group": {"topologyKey": "rack", "mode": "Preferred"}},
        gangScheduling={"scheduler": "Kueue", "queue": "gpu"},
    ),
    body(
        autoscaling={
            **AUTO,
            "prefill": {"min": 1, "max": 4, "cost": 4},
            "decode": {"min": 2, "max": 2, "cost": 1},
            "prefillPerDecode": {"min": 0.5, "max": 2},
            "budget": {"cost": 12},
        },
        monitoring={"enabled": True},
    ),
]


@pytest.mark.parametrize("obj", GOOD)
def test_good_objects_pass(obj: dict[str, Any]) -> None:
    assert _failing(obj) == set()


def _scaled(obj: dict[str, Any], decode: int) -> dict[str, Any]:
    """``obj`` as kubectl scale leaves it: spec.decode.replicas set to ``decode``."""
    out = copy.deepcopy(obj)
    out["spec"]["decode"]["replicas"] = decode
    return out


def _undeclared_pair() -> dict[str, Any]:
    obj = vllm_gpu_cpu()
    del obj["spec"]["modelConfig"]["kvCacheDtype"]
    return obj


BAD = [
    (
        body(engine="vllm", prefill=role(tensorParallelSize=4), decode=role(tensorParallelSize=2)),
        vllm_engine.TP_RULE[0],
    ),
    (
        body(engine="vllm", prefill=role(tensorParallelSize=2), decode=role(tensorParallelSize=3)),
        models.TP_DIVIDES_RULE[0],
    ),
    (body(decode=role(tensorParallelSize=3)), reference_engine.TP_RULE[0]),
    (body(engine="vllm", prefill=role(resources={})), vllm_engine.CPU_POOL_RULES[0][0]),
    (
        body(engine="vllm", decode=role(resources={"limits": {"cpu": "2"}})),
        vllm_engine.CPU_POOL_RULES[1][0],
    ),
    (_undeclared_pair(), vllm_engine.PAIR_RULE[0]),
    (body(kvTransfer={"backends": ["UCX", "UCX"]}), models.BACKENDS_UNIQUE_RULE[0]),
    (body(kvTransfer={"backends": ["GDS"]}), models.BACKENDS_REMOTE_RULE[0]),
    (body(kvTransfer={"backends": ["GDS", "POSIX"]}), models.BACKENDS_REMOTE_RULE[0]),
    (body(kvTransfer={"ucxTls": "cma,sm,self"}), models.UCX_REACH_RULE[0]),
    (body(kvTransfer={"ucxTls": "cuda_ipc,cuda_copy"}), models.UCX_REACH_RULE[0]),
    (body(kvTransfer={"blockLeaseSeconds": 5}), models.LEASE_RULE[0]),
    (
        body(kvTransfer={"transferDeadlineSeconds": 30, "blockLeaseSeconds": 30}),
        models.LEASE_RULE[0],
    ),
    (
        body(llmd={"enabled": True, "routingSidecar": {"enabled": True}}),
        models.SIDECAR_IMAGE_RULE[0],
    ),
    (
        body(llmd={"enabled": True, "routingSidecar": {"enabled": True, "image": ""}}),
        models.SIDECAR_IMAGE_RULE[0],
    ),
    (
        body(llmd={"routingSidecar": {"enabled": True, "image": "x:1"}}),
        models.SIDECAR_NEEDS_LLMD_RULE[0],
    ),
    (body(routing={"prefillQueueLimit": 4}), models.ROUTING_QUEUE_RULE[0]),
    (body(prefill=role(replicas=2, perDecode={"ratio": 0.5})), models.PREFILL_COUNT_RULE[0]),
    (
        body(decode=role(env=[{"name": "A", "value": "1", "valueFrom": {"fieldRef": {}}}])),
        models.ENV_VALUE_RULE[0],
    ),
    (
        body(prefill={"device": "cpu", "perDecode": {"ratio": 1, "min": 3, "max": 2}}),
        models.PER_DECODE_BOUNDS_RULE[0],
    ),
    (_auto(decode={"min": 9, "max": 8}), models.AUTOSCALING_BOUNDS_RULE[0]),
    (_auto(prefillPerDecode={"min": 2, "max": 1}), models.AUTOSCALING_RATIO_RULE[0]),
    (_auto(budget={}), models.AUTOSCALING_BUDGET_RULE[0]),
    (_auto(budget={"cost": 10}), models.AUTOSCALING_COST_RULE[0]),
    (
        body(autoscaling=AUTO, monitoring=MONITORED, prefill={"perDecode": {"ratio": 0.5}}),
        models.AUTOSCALING_PER_DECODE_RULE[0],
    ),
    (body(autoscaling=AUTO), models.AUTOSCALING_MONITORING_RULE[0]),
    (body(autoscaling=AUTO, monitoring={"enabled": False}), models.AUTOSCALING_MONITORING_RULE[0]),
    (body(gangScheduling={"scheduler": "Kueue"}), models.GANG_QUEUE_RULE[0]),
    (
        body(placement={"group": {"topologyKey": "rack", "mode": "Preferred"}}),
        models.GROUP_PREFERRED_RULE[0],
    ),
    (
        body(
            placement={"group": {"topologyKey": "rack", "mode": "Preferred"}},
            gangScheduling={"scheduler": "Volcano"},
        ),
        models.GROUP_PREFERRED_RULE[0],
    ),
]
# Transition rules: (the object before, the update), each failing exactly its rule.
BAD_UPDATES = [
    (_auto(), _scaled(_auto(), 3), models.AUTOSCALING_SCALE_RULE[0]),
]


@pytest.mark.parametrize(("obj", "rule"), BAD, ids=[r[:40] for _, r in BAD])
def test_bad_objects_fail_exactly_their_rule(obj: dict[str, Any], rule: str) -> None:
    assert _failing(obj) == {rule}


@pytest.mark.parametrize(("old", "new", "rule"), BAD_UPDATES, ids=[r[:40] for *_, r in BAD_UPDATES])
def test_bad_updates_fail_exactly_their_rule(
    old: dict[str, Any], new: dict[str, Any], rule: str
) -> None:
    assert _failing(new) == set()  # a create of the same object passes
    assert _failing(new, old) == {rule}


def test_the_scale_rule_lets_autoscaling_be_turned_on_or_off_with_a_new_count() -> None:
    plain = body()
    assert _failing(_scaled(_auto(), 5), plain) == set()  # turned on, count changed with it
    assert _failing(_scaled(plain, 5), _auto()) == set()  # turned off
    assert _failing(_auto(periodSeconds=30), _auto()) == set()  # other fields change freely
    assert _failing(_scaled(plain, 4), plain) == set()  # no autoscaling: kubectl scale works
    advice = _auto(mode="Recommend")  # the plan only reported: KEDA or HPA may scale
    assert _failing(_scaled(advice, 4), advice) == set()
    assert _failing(_scaled(_auto(), 4), advice) == set()  # from Recommend to Apply at once


def test_in_recommend_mode_prefill_may_follow_decode() -> None:
    rule = models.AUTOSCALING_PER_DECODE_RULE[0]
    follows = {"prefill": {"perDecode": {"ratio": 0.5}}}
    assert rule in _failing(body(autoscaling=AUTO, monitoring=MONITORED, **follows))
    advice = {**AUTO, "mode": "Recommend"}
    assert _failing(body(autoscaling=advice, monitoring=MONITORED, **follows)) == set()


def test_every_rule_has_a_bad_object() -> None:
    bad = {r for _, r in BAD} | {r for *_, r in BAD_UPDATES}
    assert bad == {r for _, r in RULES}


def test_messages_name_the_field_or_the_fix() -> None:
    for rule, message in ALL_RULES:
        assert "spec." in message or "set it" in message, rule


_tp = st.sampled_from([1, 2, 3, 4])
_specs = st.fixed_dictionaries(
    {
        "engine": st.sampled_from(["reference", "vllm"]),
        "p_tp": _tp,
        "d_tp": _tp,
        "backends": st.lists(st.sampled_from(["UCX", "LIBFABRIC", "GDS"]), min_size=1, max_size=3),
        "llmd": st.booleans(),
        "sidecar": st.booleans(),
        "image": st.sampled_from([None, "", "x:1"]),
        "ucx": st.sampled_from([None, "tcp,self", "cma,self", "^tcp", "sm", "rc,sm"]),
        "replicas": st.sampled_from([None, 0, 2]),
        "per_decode": st.sampled_from([None, {"ratio": 0.5}, {"ratio": 2, "min": 3, "max": 1}]),
    }
)


@settings(max_examples=60, deadline=None)
@given(_specs)
def test_what_cel_rejects_validation_rejects_too(s: dict[str, Any]) -> None:
    sidecar: dict[str, Any] = {"enabled": s["sidecar"]}
    if s["image"] is not None:
        sidecar["image"] = s["image"]
    kv: dict[str, Any] = {"backends": s["backends"]}
    if s["ucx"] is not None:
        kv["ucxTls"] = s["ucx"]
    prefill: dict[str, Any] = {"device": "cpu", "tensorParallelSize": s["p_tp"]}
    if s["replicas"] is not None:
        prefill["replicas"] = s["replicas"]
    if s["per_decode"] is not None:
        prefill["perDecode"] = s["per_decode"]
    obj = body(
        engine=s["engine"],
        prefill=prefill,
        decode=role(tensorParallelSize=s["d_tp"]),
        kvTransfer=kv,
        llmd={"enabled": s["llmd"], "routingSidecar": sidecar},
    )
    problems = validation.parse(obj)[1]
    assert bool(_failing(obj)) == bool(problems), problems


# Rules whose validation knows more than CEL can say (the model's KV heads, the vLLM
# release, the engine's presets) and says so in words of its own.
RICHER = {
    models.TP_DIVIDES_RULE.rule,
    vllm_engine.TP_RULE.rule,
    vllm_engine.PAIR_RULE.rule,
    reference_engine.TP_RULE.rule,
}


SAME_WORDS = [(obj, rule) for obj, rule in BAD if rule not in RICHER]


@pytest.mark.parametrize(("obj", "rule"), SAME_WORDS, ids=[r[:40] for _, r in SAME_WORDS])
def test_validation_says_what_the_rule_says(obj: dict[str, Any], rule: str) -> None:
    """One definition per rule: the problem validation reports for a spec the rule
    refuses is the rule's own message (its text, then what was found)."""
    (found,) = [r for r in ALL_RULES if r.rule == rule]
    said = [p for p in validation.parse(obj)[1] if p.message.startswith(found.text)]
    assert said, (found.message, validation.parse(obj)[1])
    generic = "<" in found.field or "/" in found.field
    assert generic or {p.field for p in said} == {found.field}
