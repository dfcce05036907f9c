"""vLLM data-parallel pools: ``--data-parallel-size N`` in a pool's args gives one side
channel per engine by the version's rule, declared on the container and the role's
Service, reached by the canary per rank, and counted in threads, KV space and memory;
the versions and flags that cannot serve it are refused naming the field and the fix.

Port rules as read in vLLM's NIXL connector (the scheduler's ``side_channel_port``):
0.11.0 ``VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_rank * tensor_parallel_size`` plus the
TP rank per listener; 0.11.1-0.13.0 ``+ data_parallel_rank``; 0.14.0-0.32.0
``+ data_parallel_index`` (the engine's DP rank, kept for dense models).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from disagg_operator.api import CANARY_PORT
from disagg_operator.api.problems import Problem
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import derive as vllm_derive
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, env_of, role

KEY = "k" * 32
DP = "--data-parallel-size"


def _dp(size: int | str, *extra: str, **fields: Any) -> dict[str, Any]:
    return role(args=[DP, str(size), *extra], **fields)


def _deployment(prefill: dict[str, Any], decode: dict[str, Any], version: str = "0.32.0"):
    obj = body(engine="vllm", prefill=prefill, decode=decode)
    obj["spec"]["engine"]["version"] = version
    obj["spec"]["transferCanary"] = {"image": "example.com/canary:1"}
    return obj


def _problems(obj: dict[str, Any]) -> list[Problem]:
    return validation.parse(obj)[1]


def _pod(objects: list[dict[str, Any]], role_name: str) -> dict[str, Any]:
    return next(
        o for o in by_kind(objects, "Pod") if o["metadata"]["name"] == f"demo-{role_name}-0"
    )


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


@pytest.mark.parametrize(
    ("version", "tp", "dp", "ports"),
    [
        ("0.11.0", 2, 2, [5600, 5601, 5602, 5603]),  # + d x TP + r, a listener per TP rank
        ("0.11.1", 2, 3, [5600, 5601, 5602]),  # + data_parallel_rank
        ("0.13.0", 1, 2, [5600, 5601]),
        ("0.14.0", 4, 2, [5600, 5601]),  # + data_parallel_index
        ("0.32.0", 1, 1, [5600]),
        ("0.32.0", 1, 4, [5600, 5601, 5602, 5603]),
    ],
)
def test_side_channel_ports_per_version(version: str, tp: int, dp: int, ports: list[int]) -> None:
    pool = _dp(dp, tensorParallelSize=tp)
    dd, _ = validation.parse(_deployment(pool, copy.deepcopy(pool), version))
    assert vllm_derive.side_channel_ports(dd.spec, "prefill") == ports


def test_each_rank_declared_on_the_container_and_the_service() -> None:
    objects = render(_deployment(_dp(2), _dp(3)), hmac_key=KEY)
    for role_name, ports in (("prefill", [5600, 5601]), ("decode", [5600, 5601, 5602])):
        declared = _container(_pod(objects, role_name), "engine")["ports"]
        side = [(p["name"], p["containerPort"]) for p in declared if p["containerPort"] != 8000]
        names = ["side-channel", *(f"side-channel-{d}" for d in range(1, len(ports)))]
        assert side == list(zip(names, ports, strict=True))
        service = next(
            s for s in by_kind(objects, "Service") if s["metadata"]["name"] == f"demo-{role_name}"
        )
        served = [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]]
        assert served[1:] == [(n, p, p) for n, p in zip(names, ports, strict=True)]
        env = env_of(_container(_pod(objects, role_name), "engine"))
        assert env[vllm.SIDE_CHANNEL_PORT] == "5600"  # vLLM adds the rank itself


def test_the_network_policy_admits_every_rank_from_the_deployment_pods() -> None:
    objects = render(_deployment(_dp(2), _dp(2)), hmac_key=KEY)
    (policy,) = by_kind(objects, "NetworkPolicy")
    pods = _pod(objects, "prefill")["metadata"]["labels"]
    peers = [rule for rule in policy["spec"]["ingress"] if "ports" not in rule]
    (rule,) = peers  # from the deployment's own pods, every port: each side channel
    selector = rule["from"][0]["podSelector"]["matchLabels"]
    assert selector.items() <= pods.items()
    limited = [p["port"] for r in policy["spec"]["ingress"] for p in r.get("ports", [])]
    assert not {5600, 5601} & set(limited)  # no one else reaches a side channel


def test_the_canary_is_told_each_pools_ranks() -> None:
    objects = render(_deployment(_dp(2), _dp(3)), hmac_key=KEY)
    args = _container(_pod(objects, "decode"), "transfer-canary")["args"]
    assert args[args.index("--prefill-ranks") + 1] == "2"
    assert args[args.index("--decode-ranks") + 1] == "3"
    plain = render(_deployment(role(), role()), hmac_key=KEY)
    args = _container(_pod(plain, "decode"), "transfer-canary")["args"]
    assert "--prefill-ranks" not in args and "--decode-ranks" not in args


def test_threads_reserve_and_kv_space_count_each_engine() -> None:
    limits = {"limits": {"cpu": "8", "memory": "16Gi"}}
    one = _deployment(role(resources=limits), role(resources=limits))
    two = _deployment(_dp(2, resources=limits), _dp(2, "--max-num-seqs", "8", resources=limits))
    env = {
        n: env_of(_container(_pod(render(o, hmac_key=KEY), "prefill"), "engine"))
        for n, o in (("one", one), ("two", two))
    }
    # engine-idle levers on (CPU pools): a reserve of 1 CPU per rank, each engine its own
    assert env["one"]["VLLM_CPU_NUM_OF_RESERVED_CPU"] == env["two"]["VLLM_CPU_NUM_OF_RESERVED_CPU"]
    assert env["one"]["OMP_NUM_THREADS"] == "7"  # 8 - 1
    assert env["two"]["OMP_NUM_THREADS"] == "3"  # (8 - 2 x 1) // 2
    assert env["one"]["VLLM_CPU_KVCACHE_SPACE"] == "9"  # floor((16 - 3) * 0.75)
    assert env["two"]["VLLM_CPU_KVCACHE_SPACE"] == "3"  # floor((16 - 2 x 3) * 0.75 / 2)


def test_weights_are_held_once_per_engine() -> None:
    pool = _dp(2, resources={"limits": {"cpu": "4", "memory": "11Gi"}})
    obj = _deployment(pool, role())
    obj["spec"]["modelConfig"] = {"weightsMemory": "2Gi"}
    (p,) = _problems(obj)  # one engine's need would be 3 + 1 + 2: two engines need twice
    assert p.field == "spec.prefill.resources.limits.memory" and "at least 12Gi" in p.message
    obj["spec"]["prefill"]["resources"]["limits"]["memory"] = "12Gi"
    assert _problems(obj) == []


def test_a_gpu_pool_needs_a_gpu_per_engine_rank() -> None:
    gpus = {"limits": {"nvidia.com/gpu": 2}}
    pool = _dp(2, device="cuda", tensorParallelSize=2, resources=gpus, acceleratorMemory="24Gi")
    found = [p for p in _problems(_deployment(pool, copy.deepcopy(pool))) if "gpu" in p.field]
    assert found and found[0].message == (
        "2 devices for tensorParallelSize 2 x 2 data-parallel engines; set it to 4"
    )


def test_versions_without_per_engine_side_channels_are_refused() -> None:
    (p,) = _problems(
        _deployment(
            _dp(
                2,
                device="cuda",
                resources={"limits": {"nvidia.com/gpu": 2}},
                acceleratorMemory="24Gi",
            ),
            role("cuda", resources={"limits": {"nvidia.com/gpu": 1}}, acceleratorMemory="24Gi"),
            "0.11.0",
        )
    )
    assert p.field == "spec.prefill.args[0]"
    assert vllm.DP_RANK_HEADER in p.message and "vLLM >= 0.11.1" in p.message
    assert vllm.first_version("data_parallel") == "0.11.1"


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        ([DP, "two"], "spec.decode.args[0]", "not a whole number"),
        (["--max-num-seqs", "4", "--data-parallel-size=0"], "spec.decode.args[2]", "above 0"),
        ([DP, "2", "--data-parallel-size-local", "1"], "spec.decode.args[2]", "remove it"),
        (["-dpa", "10.0.0.1", "-dp", "2"], "spec.decode.args[0]", "beyond the pod"),
        ([DP, "2", "--data-parallel-external-lb"], "spec.decode.args[2]", "spec.decode.replicas"),
    ],
)
def test_unreadable_sizes_and_placement_flags_are_refused(
    args: list[str], field: str, words: str
) -> None:
    (p,) = _problems(_deployment(role(), role(args=args)))
    assert (p.field, words in p.message) == (field, True)


def test_data_parallel_in_an_instance_across_pods_is_refused() -> None:
    gpus = {"limits": {"nvidia.com/gpu": 1}}
    spanning = role("cuda", tensorParallelSize=2, nodesPerInstance=2, resources=gpus)
    spanning["args"] = [DP, "2"]
    spanning["acceleratorMemory"] = "24Gi"
    found = [
        p
        for p in _problems(_deployment(spanning, copy.deepcopy(spanning)))
        if p.field == "spec.prefill.nodesPerInstance"
    ]
    assert found and "--data-parallel-size" in found[0].message


def test_rank_ports_colliding_with_the_canary_port_are_refused() -> None:
    obj = _deployment(role(), _dp(4))
    obj["spec"]["kvTransfer"] = {"sideChannelPort": CANARY_PORT - 2}
    (p,) = _problems(obj)
    assert p.field == "spec.kvTransfer.sideChannelPort"
    assert f"decode side-channel ports {CANARY_PORT - 2}-{CANARY_PORT + 1}" in p.message
    assert "--data-parallel-size 4" in p.message and "canary" in p.message
    obj["spec"]["decode"]["args"] = [DP, "2"]  # 8088-8089: clear of 8090
    assert _problems(obj) == []
    obj["spec"]["kvTransfer"] = {"sideChannelPort": 7999}
    (p,) = _problems(obj)  # prefill's one port is clear; decode's second is the serving port
    assert "decode side-channel ports 7999-8000" in p.message and "serving port 8000" in p.message


def test_rank_ports_past_the_last_port_are_refused() -> None:
    obj = _deployment(_dp(3), role())
    obj["spec"]["kvTransfer"] = {"sideChannelPort": 65534}
    (p,) = _problems(obj)
    assert p.field == "spec.kvTransfer.sideChannelPort" and "at most 65533" in p.message
    obj["spec"]["kvTransfer"] = {"sideChannelPort": 65533}
    assert _problems(obj) == []


def test_the_profile_table_names_each_rule() -> None:
    rows = {line.split("|")[1].strip(): line for line in vllm.profile_table().splitlines()[2:]}
    assert "port + TP rank; no P/D data parallel" in rows[">=0.11.0"]
    assert "port + DP rank |" in rows[">=0.11.1"] and "port + DP rank |" in rows[vllm.NEWEST.label]


def test_rank_ports_over_the_kv_events_port_are_refused() -> None:
    obj = _deployment(_dp(2), role())
    obj["spec"]["routing"] = {"prefixIndex": "events"}
    obj["spec"]["kvTransfer"] = {"sideChannelPort": 5556}  # 5556-5557: events on 5557
    found = [p for p in _problems(obj) if p.field == "spec.kvTransfer.sideChannelPort"]
    assert found and "the KV events port 5557" in found[0].message
    obj["spec"]["kvTransfer"] = {"sideChannelPort": 5600}
    assert [p for p in _problems(obj) if p.field == "spec.kvTransfer.sideChannelPort"] == []
