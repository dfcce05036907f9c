"""Built-in objects against Kubernetes' own schema at the release the emulator stands for."""

from __future__ import annotations

import copy

from disagg_operator.render.objects import render
from disagg_tools.emulator.rules import builtin
from tests.operator.builders import body, vllm_gpu_cpu

KEY = "k" * 32


def test_every_object_the_operator_renders_passes_its_kinds_schema() -> None:
    for spec in (body(), vllm_gpu_cpu(llmd={"enabled": True})):
        for obj in render(spec, hmac_key=KEY):
            if builtin.validator(obj["kind"], obj["apiVersion"]) is not None:
                assert builtin.check(obj) == builtin.Findings([], []), obj["kind"]


def _pod() -> dict:
    pod = next(o for o in render(body(), hmac_key=KEY) if o["kind"] == "Pod")
    return copy.deepcopy(pod)


def test_an_undeclared_field_is_unknown_and_pruning_drops_only_it() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["stopSignalz"] = "SIGTERM"
    pod["spec"]["priorityClazz"] = "x"
    found = builtin.check(pod)
    assert found.unknown == ["spec.containers[0].stopSignalz", "spec.priorityClazz"]
    assert found.invalid == []
    kept = builtin.pruned(pod, found.unknown)
    assert builtin.check(kept) == builtin.Findings([], [])
    assert kept["spec"]["containers"][0]["name"] == pod["spec"]["containers"][0]["name"]


def test_a_wrong_type_or_value_is_invalid_with_its_path() -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": "eighty"}]
    pod["spec"]["terminationGracePeriodSeconds"] = "long"
    found = builtin.check(pod)
    assert found.unknown == []
    joined = " | ".join(found.invalid)
    assert "spec.containers[0].ports[0].containerPort:" in joined
    assert "spec.terminationGracePeriodSeconds: 'long' is not of type" in joined


def test_a_kind_without_a_schema_is_not_judged() -> None:
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "spec": 1}
    assert builtin.validator("LeaderWorkerSet", lws["apiVersion"]) is None
    assert builtin.check(lws) == builtin.Findings([], [])
