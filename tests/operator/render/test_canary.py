"""The transfer canary's bandwidth floor: render passes derive's floor to the canary as
``--min-bandwidth-gbps`` (below it the canary says SlowTransport), and nothing without one;
its wire check: the prefill pods' wire peer, the wires expected, the engine's UCX env."""

from __future__ import annotations

import dataclasses
from typing import Any

from disagg_contract.canary import WIRE_PEER_PORT
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.render import canary
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from disagg_worker.serve.canary import parser
from tests.operator.builders import body, by_kind, env_of, role

FLAG = "--min-bandwidth-gbps"
SETTINGS = dataclasses.replace(DEFAULT, canary_image="example.com/disagg-worker:1")
GPU = {"limits": {"nvidia.com/gpu": 1}}
IB = {"resources": {"rdma/rdma_shared_device_a": 1}, "devices": ["mlx5_0:1"]}


def _args(obj: dict[str, Any]) -> list[str]:
    """The args of the first decode pod's canary container."""
    pods = by_kind(render(obj, hmac_key="k", settings=SETTINGS), "Pod")
    decode = next(p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == "decode")
    found = next(c for c in decode["spec"]["containers"] if c["name"] == canary.NAME)
    args: list[str] = found["args"]
    return args


def _floor(args: list[str]) -> str | None:
    return args[args.index(FLAG) + 1] if FLAG in args else None


def test_the_canarys_floor_is_rendered_compactly_and_the_canary_reads_it() -> None:
    args = _args(body(transferCanary={"minBandwidthGbytesPerSecond": 5.0}))
    assert _floor(args) == "5"
    assert _floor(_args(body(transferCanary={"minBandwidthGbytesPerSecond": 0.25}))) == "0.25"
    # the worker's own parser takes what render wrote (the operator's canary, unchanged)
    parsed = parser().parse_args(args)
    assert parsed.min_bandwidth_gbps == 5.0


def test_no_floor_no_flag() -> None:
    assert _floor(_args(body())) is None
    assert _floor(_args(body(decode=role(replicas=2)))) is None


def test_an_rdma_pair_gets_the_rdma_floor_unless_the_canary_sets_one() -> None:
    pair = {
        "engine": "vllm",
        "prefill": role("cuda", resources=dict(GPU)),
        "decode": role("cuda", resources=dict(GPU)),
    }
    rdma = body(**pair, kvTransfer={"rdma": IB})
    dd, problems = validation.parse(rdma, settings=SETTINGS)
    assert dd is not None and not problems, problems
    assert _floor(_args(rdma)) == "1"  # derive.transfer.RDMA_FLOOR_GBPS
    given = body(
        **pair, kvTransfer={"rdma": IB}, transferCanary={"minBandwidthGbytesPerSecond": 12.5}
    )
    assert _floor(_args(given)) == "12.5"


def _containers(obj: dict[str, Any], role_name: str) -> dict[str, dict[str, Any]]:
    pods = by_kind(render(obj, hmac_key="k", settings=SETTINGS), "Pod")
    pod = next(p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == role_name)
    return {c["name"]: c for c in pod["spec"]["containers"]}


def test_the_decode_engine_is_gated_by_the_canary_and_the_canary_probes_only_its_liveness() -> None:
    """A kubelet turns a restarted container unready until its own probe passes: the gate
    on the engine container makes an engine restart wait for a canary on the new engine."""
    obj = body(kvTransfer={"transferDeadlineSeconds": 1})
    decode = _containers(obj, "decode")
    gate = decode["engine"]["readinessProbe"]
    assert gate["httpGet"] == {"path": "/ready", "port": 8090}
    t = canary.timings(validation.parse(obj)[0].spec)  # type: ignore[union-attr]
    assert (gate["periodSeconds"], gate["timeoutSeconds"]) == (t.period, t.probe_timeout) == (6, 8)
    assert "readinessProbe" not in decode[canary.NAME]  # it never takes the pod out itself
    assert decode[canary.NAME]["livenessProbe"]["httpGet"] == {"path": "/metrics", "port": 8090}
    prefill = _containers(obj, "prefill")["engine"]["readinessProbe"]
    assert prefill["httpGet"] == {"path": "/health", "port": 8000}
    off = _containers(body(transferCanary={"enabled": False}), "decode")
    assert set(off) == {"engine"}
    assert off["engine"]["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8000}


def test_the_canary_probes_the_prefill_pods_wire_peer_with_the_engines_ucx_env() -> None:
    obj = body(kvTransfer={"ucxTls": "tcp,cma,self"})
    decode, prefill = _containers(obj, "decode"), _containers(obj, "prefill")
    args = decode[canary.NAME]["args"]
    parsed = parser().parse_args(args)  # the worker's own parser takes what render wrote
    assert parsed.wire_peer_port == 8091 == WIRE_PEER_PORT
    assert dict(parsed.expect_wire) == {"intra-node": ("shared-memory",), "inter-node": ("tcp",)}
    peer = prefill[canary.WIRE_PEER]
    assert peer["image"] == decode[canary.NAME]["image"]  # the canary's: it has `disagg`
    assert peer["command"] == ["disagg", "worker", "wire", "peer"]
    assert peer["args"] == ["--host", "0.0.0.0", "--port", "8091"]
    assert peer["ports"] == [{"name": "wire-peer", "containerPort": 8091, "protocol": "TCP"}]
    assert peer["securityContext"]["readOnlyRootFilesystem"] is True
    # both run UCX as their pod's engine does: the same UCX_* env, nothing else
    for name, container in ((canary.NAME, decode), (canary.WIRE_PEER, prefill)):
        engine = {k: v for k, v in env_of(container["engine"]).items() if k.startswith("UCX_")}
        assert engine["UCX_TLS"] == "tcp,cma,self"
        assert env_of(container[name]) == engine


def test_no_canary_no_wire_peer_and_libfabric_no_wire_check() -> None:
    assert set(_containers(body(transferCanary={"enabled": False}), "prefill")) == {"engine"}
    efa = {"transport": "libfabric", "resources": {"vpc.amazonaws.com/efa": 4}}
    pair = {
        "engine": "vllm",
        "prefill": role("cuda", resources=dict(GPU)),
        "decode": role("cuda", resources=dict(GPU)),
    }
    obj = body(**pair, kvTransfer={"rdma": efa, "backends": ["LIBFABRIC"]})
    assert set(_containers(obj, "prefill")) == {"engine"}
    assert "--wire-peer-port" not in _args(obj) and "--expect-wire" not in _args(obj)
