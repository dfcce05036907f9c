"""Validation: every problem names its camelCase field path and says how to fix it."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_contract import platforms
from disagg_operator.api import rules
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.render import crd
from disagg_operator.render import objects as render
from disagg_operator.validation import spec as validation
from disagg_operator.validation.spec import Problem
from tests.operator.builders import GPU, ROOT, body, example, role, vllm_gpu_cpu


def _problems(obj: dict[str, Any]) -> list[Problem]:
    _, problems = validation.parse(obj)
    return problems


def _only(obj: dict[str, Any]) -> Problem:
    problems = _problems(obj)
    assert len(problems) == 1, problems
    return problems[0]


def test_valid_bodies_have_no_problems() -> None:
    for obj in (body(), vllm_gpu_cpu()):
        dd, problems = validation.parse(obj)
        assert dd is not None and problems == []


def test_unknown_device_lists_the_known_ones() -> None:
    p = _only(body(prefill=role("gpu")))
    assert p.field == "spec.prefill.device"
    assert "'gpu'" in p.message and "cpu, cuda, rocm, tpu, xpu" in p.message


def test_an_out_of_tree_platform_is_accepted_by_the_settings_that_declare_it() -> None:
    hpu = platforms.Platform("hpu", ("cpu", "hpu"), "habana.ai/gaudi", "tcp,self")
    obj = body(engine="vllm", prefill=role("hpu", resources={"limits": {"habana.ai/gaudi": 1}}))
    assert _only(obj).field == "spec.prefill.device"
    dd = DEFAULT.model.model_validate(obj)
    assert validation.check(dd, DEFAULT.with_platforms([hpu])) == []
    assert _only(obj).field == "spec.prefill.device"  # the default settings are untouched


AMD = {"limits": {"amd.com/gpu": 1}}


def test_rocm_pool_needs_amd_gpus_not_nvidia_ones() -> None:
    p = _only(body(engine="vllm", prefill=role("rocm", resources=GPU)))
    assert p.field == "spec.prefill.resources.limits"
    assert "resources.limits['amd.com/gpu']: 1" in p.message
    assert _problems(body(engine="vllm", prefill=role("rocm", resources=AMD))) == []


def test_rocm_buffers_are_checked_against_vllms_cuda_row() -> None:
    # vLLM runs ROCm as device type cuda: a host buffer needs vLLM >= 0.11.1, as on cuda.
    old = {"type": "vllm", "image": "example.com/vllm:1", "version": "0.11.0"}
    obj = body(engine="vllm", prefill=role("rocm", resources=AMD, kvBufferDevice="cpu"))
    obj["spec"]["engine"] = old
    p = next(p for p in _problems(obj) if p.field == "spec.prefill.kvBufferDevice")
    assert "0.11.0" in p.message and "(it allows cuda)" in p.message


def test_backend_outside_the_platforms_list() -> None:
    hpu = platforms.Platform("hpu", ("hpu", "cpu"), "habana.ai/gaudi", "tcp,self", ("UCX",))
    obj = body(
        engine="vllm",
        prefill=role("hpu", resources={"limits": {"habana.ai/gaudi": 1}}),
        kvTransfer={"backends": ["LIBFABRIC"]},
    )
    (p,) = validation.parse(obj, DEFAULT.with_platforms([hpu]))[1]
    assert p.field == "spec.kvTransfer.backends"
    assert "'LIBFABRIC' is not usable on device 'hpu'" in p.message and "UCX" in p.message


def test_buffer_device_outside_the_platform_table() -> None:
    p = _only(body(decode=role("cpu", kvBufferDevice="cuda")))
    assert p.field == "spec.decode.kvBufferDevice"
    assert "not supported on device 'cpu'" in p.message and "omit it" in p.message


def test_backend_that_cannot_move_the_memory_type() -> None:
    gpu = role("cuda", resources=GPU)
    obj = body(engine="vllm", prefill=gpu, decode=gpu, kvTransfer={"backends": ["UCX", "POSIX"]})
    problems = _problems(obj)
    assert {p.field for p in problems} == {"spec.kvTransfer.backends"}
    assert "'POSIX' cannot move VRAM" in problems[0].message and "UCX" in problems[0].message


def _llmd_example(backends: list[str]) -> dict[str, Any]:
    """examples/llm-d.yaml (vLLM on a cuda → cuda pair) with its backends set."""
    obj = example(ROOT / "examples" / "llm-d.yaml")
    obj["spec"]["kvTransfer"] = {"backends": backends}
    return obj


@pytest.mark.parametrize("backends", [["GDS"], ["GDS_MT"], ["GDS", "GDS_MT"]])
def test_nixl_v1_4_0_storage_backends_are_refused_on_the_llmd_cuda_pair(
    backends: list[str],
) -> None:
    p = _only(_llmd_example(backends))
    assert p.field == "spec.kvTransfer.backends"
    assert "reach another pod" in p.message
    assert "use UCX, or add a network backend: GPUNETIO, LIBFABRIC, MOONCAKE, UCCL, UCX" in (
        p.message
    )
    assert p == rules.BACKENDS_REMOTE_RULE.problem(found=", ".join(backends))  # CEL's words


def test_gds_beside_a_network_backend_is_accepted() -> None:
    # NIXL loads only a peer's remote-capable backends: UCX carries the KV, GDS stays local
    assert _problems(_llmd_example(["UCX", "GDS"])) == []
    assert _problems(vllm_gpu_cpu(kvTransfer={"backends": ["GDS", "UCX"]})) == []


def test_reference_model_must_be_a_preset() -> None:
    obj = body()
    obj["spec"]["model"] = "huge"
    problem = _only(obj)
    assert problem.field == "spec.model"
    assert "no model 'huge'" in problem.message and "tiny" in problem.message


def test_lease_shorter_than_the_deadline() -> None:
    problem = _only(body(kvTransfer={"transferDeadlineSeconds": 20, "blockLeaseSeconds": 15}))
    assert problem.field == "spec.kvTransfer.blockLeaseSeconds"
    assert problem.message.endswith(
        "raise the lease (blockLeaseSeconds 15, transferDeadlineSeconds 20)"
    )


def test_prefill_tp_above_decode_tp() -> None:
    p = _only(
        body(engine="vllm", prefill=role(tensorParallelSize=4), decode=role(tensorParallelSize=2))
    )
    assert p.field == "spec.prefill.tensorParallelSize"
    assert "exceeds spec.decode.tensorParallelSize 2" in p.message


def test_decode_tp_not_a_multiple() -> None:
    p = _only(
        body(engine="vllm", prefill=role(tensorParallelSize=2), decode=role(tensorParallelSize=3))
    )
    assert p.field == "spec.decode.tensorParallelSize" and "use 4" in p.message


def test_gpu_role_without_the_accelerator_resource() -> None:
    p = _only(body(engine="vllm", prefill=role("cuda")))
    assert p.field == "spec.prefill.resources.limits"
    assert "resources.limits['nvidia.com/gpu']: 1" in p.message


def test_gpu_role_with_fewer_gpus_than_tp() -> None:
    tp2 = role("cuda", tensorParallelSize=2, resources=GPU)
    p = _only(
        body(
            engine="vllm",
            prefill=tp2,
            decode=role("cuda", tensorParallelSize=2, resources={"limits": {"nvidia.com/gpu": 2}}),
        )
    )
    assert p.field == "spec.prefill.resources.limits[nvidia.com/gpu]" and "set it to 2" in p.message


def test_gpu_role_scaled_to_zero_needs_no_gpu() -> None:
    assert _problems(body(engine="vllm", prefill=role("cuda", replicas=0))) == []


def test_reference_engine_limits() -> None:
    fields = {
        p.field
        for p in _problems(
            body(
                decode=role(
                    "xpu", tensorParallelSize=2, resources={"limits": {"gpu.intel.com/i915": 2}}
                )
            )
        )
    }
    assert fields == {"spec.decode.tensorParallelSize", "spec.decode.device"}


@pytest.mark.parametrize(
    ("obj", "field", "needle"),
    [
        (body(prefill=role(replicas=-1)), "spec.prefill.replicas", "greater than or equal to 0"),
        (body(prefill=role(replica=2)), "spec.prefill.replica", "unknown field"),
        (
            body(kvTransfer={"connector": "P2pNcclConnector"}),
            "spec.kvTransfer.connector",
            "NixlConnector",
        ),
        (body(env=[{"name": "X"}]), "spec.env", "unknown field"),
    ],
)
def test_schema_errors_use_camel_case_paths(obj: dict[str, Any], field: str, needle: str) -> None:
    dd, problems = validation.parse(obj)
    assert dd is None
    assert [p.field for p in problems] == [field] and needle in problems[0].message


def test_missing_fields_say_required() -> None:
    obj = body()
    del obj["spec"]["engine"]
    assert _problems(obj) == [Problem("spec.engine", "required; add it")]


def test_list_indices_in_paths() -> None:
    obj = body(prefill=role(tolerations=[{"key": "a"}, {"effect": "Sometimes"}]))
    assert _problems(obj)[0].field == "spec.prefill.tolerations[1].effect"


def test_bad_quantity() -> None:
    p = _only(body(prefill=role(resources={"limits": {"memory": "lots"}})))
    assert p.field == "spec.prefill.resources.limits[memory]" and "16Gi" in p.message


def test_name_too_long_for_pod_hostnames() -> None:
    p = _only(body(name="x" * 60))
    assert p.field == "metadata.name" and "at most 50 characters" in p.message


@pytest.mark.parametrize("name", ["my.app", "9lives", "Upper", "trailing-"])
def test_name_must_be_a_dns_label(name: str) -> None:
    p = _only(body(name=name))
    assert p.field == "metadata.name" and "DNS label" in p.message


def test_side_channel_port_clashing_with_the_serving_port() -> None:
    p = _only(body(engine="vllm", kvTransfer={"sideChannelPort": 8000}))
    assert p.field == "spec.kvTransfer.sideChannelPort" and "8000" in p.message
    # one listener per engine from 0.11.1: TP adds no ports
    tp2 = {"tensorParallelSize": 2}
    assert (
        _problems(
            body(
                engine="vllm",
                prefill=role(**tp2),
                decode=role(**tp2),
                kvTransfer={"sideChannelPort": 7999},
            )
        )
        == []
    )


def test_side_channel_ports_per_tp_rank_on_0_11_0() -> None:
    gpu2 = role("cuda", tensorParallelSize=2, resources={"limits": {"nvidia.com/gpu": 2}})
    obj = body(engine="vllm", prefill=gpu2, decode=gpu2, kvTransfer={"sideChannelPort": 7999})
    obj["spec"]["engine"]["version"] = "0.11.0"
    p = _only(obj)
    assert p.field == "spec.kvTransfer.sideChannelPort" and "8000" in p.message


def test_sidecar_rules() -> None:
    assert _only(body(llmd={"routingSidecar": {"enabled": True, "image": "x:1"}})).field == (
        "spec.llmd.routingSidecar.enabled"
    )
    assert _only(body(llmd={"enabled": True, "routingSidecar": {"enabled": True}})).field == (
        "spec.llmd.routingSidecar.image"
    )


def test_a_prefill_queue_limit_needs_the_threshold_policy() -> None:
    p = _only(body(routing={"prefillQueueLimit": 4}))
    assert p.field == "spec.routing.prefillQueueLimit" and "disaggregate: threshold" in p.message
    limited = {"disaggregate": "threshold", "prefillQueueLimit": 4}
    assert validation.parse(body(routing=limited))[1] == []


def test_sidecar_args_that_fight_derived_or_retired_flags_are_refused() -> None:
    llmd = {"enabled": True, "routingSidecar": {"enabled": True, "image": "x:1"}}
    llmd["routingSidecar"]["args"] = ["--enable-ssrf-protection=true", "--connector=nixlv2"]
    p = _only(body(llmd=llmd))
    assert p.field == "spec.llmd.routingSidecar.args[1]" and "--kv-connector" in p.message
    llmd["routingSidecar"]["args"] = ["-port=9000"]
    assert "8000" in _only(body(llmd=llmd)).message
    llmd["routingSidecar"]["args"] = ["--secure-proxy=true"]  # an explicit choice: allowed
    assert validation.parse(body(llmd=llmd))[1] == []


@pytest.mark.parametrize(
    ("flag", "fix"),
    [
        ("--prefiller-tls-insecure-skip-verify", "--tls-insecure-skip-verify=prefiller"),
        ("--decoder-tls-insecure-skip-verify=true", "--tls-insecure-skip-verify=decoder"),
        ("-prefiller-use-tls", "--enable-tls=prefiller"),
    ],
)
def test_tls_flags_the_v0_10_sidecar_no_longer_takes_are_refused_with_the_new_one(
    flag: str, fix: str
) -> None:
    """The v0.10.0 sidecar exits on an unknown flag: refused at admission instead."""
    llmd = {"enabled": True, "routingSidecar": {"enabled": True, "image": "x:1", "args": [flag]}}
    p = _only(body(llmd=llmd))
    assert p.field == "spec.llmd.routingSidecar.args[0]"
    assert "removed in llm-d-router v0.10.0" in p.message and fix in p.message


def test_an_unknown_inference_pool_version_names_the_field_and_the_choices() -> None:
    p = _only(body(llmd={"enabled": True, "inferencePool": {"version": "v1beta1"}}))
    assert p.field == "spec.llmd.inferencePool.version"
    assert "'v1'" in p.message


def test_problem_prints_as_field_colon_message() -> None:
    assert str(Problem("spec.x", "bad; fix it")) == "spec.x: bad; fix it"


def test_render_refuses_invalid_specs_with_the_problems() -> None:
    with pytest.raises(validation.InvalidSpec) as info:
        render.render(body(prefill=role("gpu")), hmac_key="k")
    assert [p.field for p in info.value.problems] == ["spec.prefill.device"]
    assert "spec.prefill.device" in str(info.value)


@pytest.mark.parametrize("tls", ["cma,self", "sm,self", "posix,sysv,cuda_ipc,self"])
def test_ucx_tls_without_a_network_transport(tls: str) -> None:
    problem = _only(body(kvTransfer={"ucxTls": tls}))
    assert problem.field == "spec.kvTransfer.ucxTls"
    assert "add tcp, or rc for RDMA" in problem.message
    assert "different pods" in problem.message


@pytest.mark.parametrize("tls", ["tcp,self", "rc,ud,tcp,cma,self", "^tcp", "all", "ud_x,sm"])
def test_ucx_tls_that_can_reach_the_peer_pod(tls: str) -> None:
    assert _problems(body(kvTransfer={"ucxTls": tls})) == []


def test_an_engine_the_operator_does_not_serve_is_refused_naming_the_ones_it_does() -> None:
    obj = body()
    obj["spec"]["engine"]["type"] = "sglang"
    _, problems = validation.parse(obj)
    assert [p.field for p in problems] == ["spec.engine.type"]
    assert "unknown engine 'sglang'; use vllm, reference" in problems[0].message


def test_one_max_model_len_and_block_size_for_both_pools() -> None:
    """A prefill that takes longer prompts than its decode prefills what decode refuses."""
    cpu = {"limits": {"cpu": "8", "memory": "16Gi"}}

    def with_args(prefill: list[str], decode: list[str], **model: Any) -> list[Problem]:
        obj = body(
            engine="vllm",
            prefill=role(args=prefill, resources=cpu),
            decode=role(args=decode, resources=cpu),
        )
        if model:
            obj["spec"]["modelConfig"] = model
        return validation.parse(obj)[1]

    (p,) = with_args([], ["--max-model-len", "8192"])
    assert p.field == "spec.modelConfig.maxModelLen"
    assert "prefill unset, decode 8192" in p.message and "set spec.modelConfig" in p.message
    (p,) = with_args(["--block-size=16"], ["--block-size", "32"])
    assert p.field == "spec.modelConfig.blockSize" and "prefill 16, decode 32" in p.message
    assert with_args(["--max-model-len", "1024"], ["--max-model-len=1024"]) == []  # one value
    assert with_args([], [], maxModelLen=8192, blockSize=16) == []
    (p,) = with_args([], ["--max-model-len", "8192"], maxModelLen=8192)
    assert p.field == "spec.decode.args[0]" and "derived from spec.modelConfig" in p.message
    ref = body(modelConfig={"maxModelLen": 100})
    (p,) = validation.parse(ref)[1]
    assert p.field == "spec.modelConfig.maxModelLen"  # vLLM's field (engines/vllm/fields.py)
    assert p.message.startswith("a field of engine vllm; engine reference does not read it")


@pytest.mark.parametrize(
    ("role_fields", "field", "says"),
    [
        (
            {"env": [{"name": "X", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "a"}}}]},
            "spec.decode.env[0]",
            "sets both value and valueFrom",
        ),
        ({"env": [{"name": "X", "valueFrom": {}}]}, "spec.decode.env[0].valueFrom", "got none"),
        (
            {"env": [{"name": "X", "valueFrom": {"secretRef": {"name": "s"}}}]},
            "spec.decode.env[0].valueFrom.secretRef",
            "unknown field",
        ),
        (
            {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s"}}}]},
            "spec.decode.env[0].valueFrom.secretKeyRef.key",
            "required",
        ),
        ({"affinity": {"nodeAffinity": "oops"}}, "spec.decode.affinity.nodeAffinity", "object"),
        ({"affinity": {"nodeAfinity": {}}}, "spec.decode.affinity.nodeAfinity", "unknown field"),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k"}]}]
                        }
                    }
                }
            },
            "spec.decode.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms[0].matchExpressions[0].operator",
            "required",
        ),
        (
            {
                "topologySpreadConstraints": [
                    {"maxSkew": "1", "topologyKey": "k", "whenUnsatisfiable": "DoNotSchedule"}
                ]
            },
            "spec.decode.topologySpreadConstraints[0].maxSkew",
            "must be an integer",
        ),
    ],
)
def test_pass_through_shapes_the_api_server_refuses_are_refused_before_anything_is_created(
    role_fields: dict[str, Any], field: str, says: str
) -> None:
    p = _only(body(decode=role(**role_fields)))
    assert p.field == field and says in p.message


def test_well_formed_pass_through_env_and_affinity_pass() -> None:
    env = [
        {"name": "A", "value": "1"},
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}},
    ]
    affinity = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    assert validation.parse(body(decode=role(env=env, affinity=affinity)))[1] == []


def test_an_env_name_listed_twice_is_refused_by_name() -> None:
    """The pods would get both and the last would win silently; the CRD makes the list a
    map keyed by name, so an API server refuses it too."""
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}, {"name": "A", "value": "3"}]
    p = _only(body(prefill=role(env=env)))
    assert p.field == "spec.prefill.env[2].name"
    assert "'A'" in p.message and "env[0]" in p.message and "one entry" in p.message
    schema = crd.build()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    env_schema = schema["properties"]["spec"]["properties"]["prefill"]["properties"]["env"]
    assert env_schema["x-kubernetes-list-type"] == "map"
    assert env_schema["x-kubernetes-list-map-keys"] == ["name"]
    assert "name" in env_schema["items"]["required"]


def test_a_cpu_pool_that_cannot_hold_the_weights_is_refused_with_the_numbers() -> None:
    obj = body(engine="vllm", decode=role(resources={"limits": {"cpu": "8", "memory": "8Gi"}}))
    obj["spec"]["modelConfig"] = {"weightsMemory": "6Gi"}
    (p,) = validation.parse(obj)[1]
    assert p.field == "spec.decode.resources.limits.memory"
    assert "8 GiB cannot hold" in p.message and "the weights (6 GiB" in p.message
    assert "set at least 10Gi" in p.message  # 3 GiB runtime + 6 GiB weights + 1 GiB KV
    obj["spec"]["decode"]["resources"]["limits"]["memory"] = "10Gi"
    assert validation.parse(obj)[1] == []
