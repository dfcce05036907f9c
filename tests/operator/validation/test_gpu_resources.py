"""GPU quantities as the API server takes them (pkg/apis/core/validation:
validateResourceRequirements and validateResourceQuantityValue: an extended resource is a
whole number, cannot be overcommitted, so a request needs a limit and equals it), and no GPU
a role's ranks leave idle."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.validation import spec as validation
from disagg_operator.validation.spec import Problem
from tests.operator.builders import body, role


def _problems(prefill: dict[str, Any], decode_tp: int = 1) -> list[Problem]:
    gpus = {"limits": {"nvidia.com/gpu": decode_tp}}
    gpu = role("cuda", tensorParallelSize=decode_tp, resources=gpus)
    return validation.parse(body(engine="vllm", prefill=prefill, decode=gpu))[1]


def _gpu(tp: int = 1, **resources: Any) -> dict[str, Any]:
    return role("cuda", tensorParallelSize=tp, resources=resources)


def test_a_fraction_of_a_gpu_is_refused_as_the_api_server_refuses_it() -> None:
    (p,) = _problems(_gpu(limits={"nvidia.com/gpu": "1.5"}))
    assert p.field == "spec.prefill.resources.limits[nvidia.com/gpu]"
    assert "must be a whole number" in p.message and "'1.5'" in p.message


@pytest.mark.parametrize("value", ["500m", "0.5"])
def test_a_fractional_request_of_an_extended_resource_is_refused(value: str) -> None:
    problems = _problems(_gpu(limits={"nvidia.com/gpu": 1}, requests={"nvidia.com/gpu": value}))
    assert {p.field for p in problems} == {"spec.prefill.resources.requests[nvidia.com/gpu]"}
    assert any("whole number" in p.message for p in problems)


def test_a_gpu_request_unequal_to_its_limit_is_refused() -> None:
    (p,) = _problems(_gpu(tp=1, limits={"nvidia.com/gpu": 1}, requests={"nvidia.com/gpu": 2}))
    assert p.field == "spec.prefill.resources.requests[nvidia.com/gpu]"
    assert "must equal its limit 1" in p.message and "omit the request" in p.message


def test_a_gpu_request_without_a_limit_is_refused() -> None:
    problems = _problems(_gpu(requests={"nvidia.com/gpu": 1}))
    fields = {p.field for p in problems}
    # the API server's own rule, and the role's missing accelerator limit
    assert "spec.prefill.resources.limits[nvidia.com/gpu]" in fields
    assert any("cannot be overcommitted" in p.message for p in problems)


def test_any_extended_resource_follows_the_rule_not_only_the_pool_s_gpu() -> None:
    (p,) = _problems(_gpu(limits={"nvidia.com/gpu": 1, "rdma/hca": 1}, requests={"rdma/hca": 2}))
    assert p.field == "spec.prefill.resources.requests[rdma/hca]"


def test_native_resources_may_overcommit_and_be_fractional() -> None:
    assert (
        _problems(
            _gpu(
                limits={"nvidia.com/gpu": 1, "cpu": "8", "memory": "64Gi"},
                requests={"nvidia.com/gpu": 1, "cpu": "3.5", "memory": "32Gi"},
            )
        )
        == []
    )


def test_gpus_beyond_the_ranks_are_refused_with_the_count_to_set() -> None:
    (p,) = _problems(_gpu(tp=1, limits={"nvidia.com/gpu": 8}))
    assert p.field == "spec.prefill.resources.limits[nvidia.com/gpu]"
    assert "7 would sit idle" in p.message and "set it to 1" in p.message


def test_vllm_pipeline_ranks_use_their_gpus() -> None:
    prefill = _gpu(tp=2, limits={"nvidia.com/gpu": 4})
    prefill["args"] = ["--pipeline-parallel-size", "2"]
    assert _problems(prefill, decode_tp=2) == []
    prefill["args"] = ["-pp=2"]
    assert _problems(prefill, decode_tp=2) == []
    prefill["args"] = []
    (p,) = _problems(prefill, decode_tp=2)
    assert "set it to 2" in p.message
