"""LeaderWorkerSet's part in a local run: a rendered LWS becomes its group's pods, with
LWS's labels and env, its $(VAR) references resolved by the kubelet's expansion."""

from __future__ import annotations

from disagg_operator.contracts import lws
from disagg_operator.render.objects import render
from disagg_tools.local.rules.env import PodFields, container_env, data_of
from disagg_tools.local.rules.groups import group_pods, is_group_worker
from tests.operator.builders import body, env_of, role

KEY = "k" * 32


def test_each_group_becomes_its_leader_and_workers_with_the_lws_env() -> None:
    objects = render(body(prefill=role(tensorParallelSize=4, nodesPerInstance=2)), hmac_key=KEY)
    pods = [o for o in group_pods(objects, lambda *_: "127.0.9.2") if o["kind"] == "Pod"]
    names = [p["metadata"]["name"] for p in pods]
    assert names == ["demo-prefill-0-0", "demo-prefill-0-0-1", "demo-decode-0"]
    leader, worker, decode = pods
    labels = [p["metadata"]["labels"] for p in (leader, worker, decode)]
    assert [is_group_worker(one) for one in labels] == [False, True, False]
    for index, pod in enumerate((leader, worker)):
        container = pod["spec"]["containers"][0]
        assert list(env_of(container))[:3] == [
            lws.ENV_LEADER_ADDRESS, lws.ENV_GROUP_SIZE, lws.ENV_WORKER_INDEX
        ]  # fmt: skip
        assert env_of(container)["DISAGG_NODE_RANK"] == f"$({lws.ENV_WORKER_INDEX})"
        fields = PodFields(pod, "127.0.9.3", "127.0.9.3", "local")
        env = container_env("test", container, fields, data_of(objects))
        assert env["DISAGG_NODE_RANK"] == str(index)  # as the kubelet expands it
        assert env["DISAGG_LEADER_ADDRESS"] == "127.0.9.2"
    # the leader alone carries the KV revision routers select
    assert "disagg.dev/kv-revision" in leader["metadata"]["labels"]
    assert "disagg.dev/kv-revision" not in worker["metadata"]["labels"]
