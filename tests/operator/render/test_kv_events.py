"""spec.routing.prefixIndex: events — every vLLM pod publishes its KV cache events alike
(block size, hash algorithm, PYTHONHASHSEED), on a declared port only the router may reach,
and the router subscribes with the same settings; engines without events are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_operator.engines.vllm import kv_events
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from disagg_worker.serve.proxy import app as proxy
from disagg_worker.serve.proxy.config import from_args
from disagg_worker.serve.proxy.rules.kv_events import Hashing
from tests.operator.builders import body, by_kind, env_of, vllm_gpu_cpu

KEY = "k" * 32
EVENTS = {"disaggregate": "threshold", "prefixIndex": "events"}
ROUTER = {"enabled": True, "image": "example.com/disagg:1"}


def _problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    dd, problems = validation.parse(obj)
    assert dd is not None, problems
    return [(p.field, p.message) for p in validation.check(dd)]


def _flag(command: list[str], flag: str) -> str | None:
    return command[command.index(flag) + 1] if flag in command else None


def _engines(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c for pod in by_kind(objects, "Pod") for c in pod["spec"]["containers"]
            if c["name"] == "engine"]  # fmt: skip


def test_every_vllm_pod_publishes_alike() -> None:
    """Both pools run the decode's block (vLLM's CPU default, 128, where modelConfig gives
    none), one hash algorithm and seed, and publish on a declared port."""
    objects = render(body(engine="vllm", routing=EVENTS), hmac_key=KEY)
    engines = _engines(objects)
    assert len(engines) == 2
    for c in engines:
        cmd = c["command"]
        config = json.loads(_flag(cmd, "--kv-events-config") or "{}")
        assert config == {
            "enable_kv_cache_events": True, "publisher": "zmq", "endpoint": "tcp://*:5557",
            "topic": "kv@$(VLLM_NIXL_SIDE_CHANNEL_HOST)@Qwen/Qwen3-0.6B",
        }  # fmt: skip
        assert _flag(cmd, "--prefix-caching-hash-algo") == "sha256_cbor"
        assert _flag(cmd, "--block-size") == "128"  # the CPU decode's default
        assert env_of(c)["PYTHONHASHSEED"] == "0"
        assert {"name": "kv-events", "containerPort": 5557, "protocol": "TCP"} in c["ports"]
        names = [e["name"] for e in c["env"]]  # the topic's $(VAR) is defined before use
        assert "VLLM_NIXL_SIDE_CHANNEL_HOST" in names


def test_the_block_size_given_is_kept() -> None:
    """A GPU prefill and a CPU decode (whose defaults differ) name their block in
    modelConfig: it is rendered once, not overridden."""
    objects = render(vllm_gpu_cpu(routing=EVENTS), hmac_key=KEY)
    for c in _engines(objects):
        assert c["command"].count("--block-size") == 1
        assert _flag(c["command"], "--block-size") == "64"


def test_off_by_default() -> None:
    for c in _engines(render(body(engine="vllm"), hmac_key=KEY)):
        assert "--kv-events-config" not in c["command"]
        assert "PYTHONHASHSEED" not in env_of(c)
        assert all(p["name"] != "kv-events" for p in c["ports"])


def test_only_the_router_may_subscribe() -> None:
    objects = render(body(engine="vllm", routing=EVENTS, router=ROUTER), hmac_key=KEY)
    (policy,) = by_kind(objects, "NetworkPolicy")
    rules = [r for r in policy["spec"]["ingress"] if {"protocol": "TCP", "port": 5557}
             in r.get("ports", [])]  # fmt: skip
    assert rules == [
        {
            "from": [{"podSelector": {"matchLabels": {"disagg.dev/router": "demo"}}}],
            "ports": [{"protocol": "TCP", "port": 5557}],
        }
    ]
    plain = render(body(engine="vllm", router=ROUTER), hmac_key=KEY)
    (before,) = by_kind(plain, "NetworkPolicy")
    assert [r for r in policy["spec"]["ingress"] if r not in rules] == before["spec"]["ingress"]


def test_servingaccess_clients_do_not_reach_the_events() -> None:
    access = [{"namespaceSelector": {"matchLabels": {"team": "a"}}}]
    objects = render(body(engine="vllm", routing=EVENTS, servingAccess=access), hmac_key=KEY)
    (policy,) = by_kind(objects, "NetworkPolicy")
    for rule in policy["spec"]["ingress"]:
        if {"protocol": "TCP", "port": 5557} in rule.get("ports", []):
            assert access[0] not in rule["from"]


def test_the_router_reads_them_with_the_pods_settings() -> None:
    objects = render(body(engine="vllm", routing=EVENTS, router=ROUTER), hmac_key=KEY)
    (deployment,) = [o for o in by_kind(objects, "Deployment")
                     if o["metadata"]["name"] == "demo-router"]  # fmt: skip
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    routing = from_args(proxy._parser().parse_args(container["args"])).routing
    assert (routing.prefix_index, routing.kv_events_port) == ("events", 5557)
    assert routing.kv_events_topic == "kv@"  # a prefix of every pod's topic
    engine = _engines(objects)[-1]
    assert routing.hash_algo == _flag(engine["command"], "--prefix-caching-hash-algo")
    assert routing.hash_seed == env_of(engine)["PYTHONHASHSEED"]
    assert str(routing.block_tokens) == _flag(engine["command"], "--block-size")
    Hashing(routing.hash_algo, routing.hash_seed, routing.block_tokens)  # one it computes


def test_the_reference_engine_is_refused() -> None:
    assert any(
        field == "spec.routing.prefixIndex" and "engine reference keeps no prefix cache" in msg
        for field, msg in _problems(body(routing=EVENTS))
    )


def test_a_decode_without_prefix_cache_is_refused() -> None:
    decode = {"device": "cpu", "args": ["--no-enable-prefix-caching"]}
    found = _problems(body(engine="vllm", decode=decode, routing=EVENTS))
    assert any(f == "spec.routing.prefixIndex" for f, _ in found)


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"args": ["--block-size", "32"]}, "spec.prefill.args"),
        ({"args": ["--prefix-caching-hash-algo=sha256"]}, "spec.prefill.args"),
        ({"args": ["--kv-events-config", "{}"]}, "spec.prefill.args"),
        ({"env": [{"name": "PYTHONHASHSEED", "value": "1"}]}, "spec.prefill.env"),
    ],
)
def test_a_pod_may_not_hash_apart(extra: dict[str, Any], field: str) -> None:
    prefill = {"device": "cpu", **extra}
    found = _problems(body(engine="vllm", prefill=prefill, routing=EVENTS))
    assert any(f == field and "prefixIndex events" in m for f, m in found), found
    assert not any(f == field for f, _ in _problems(body(engine="vllm", prefill=prefill)))


def test_events_ports_follow_data_parallel_engines() -> None:
    dd, _ = validation.parse(body(engine="vllm", routing=EVENTS,
                                  decode={"device": "cpu", "args": ["-dp", "2"]}))  # fmt: skip
    assert dd is not None
    assert kv_events.ports(dd.spec, "decode") == [5557, 5558]
    assert kv_events.ports(dd.spec, "prefill") == [5557]
