"""Pod termination: a grace period long enough for in-flight KV transfers, and a preStop
that drains the engine before SIGTERM."""

from __future__ import annotations

from typing import Any

from disagg_operator.render import derivation
from disagg_operator.render.objects import render
from disagg_operator.render.pods import SHUTDOWN_MARGIN_S
from tests.operator.builders import body, by_kind, env_of, role, vllm_gpu_cpu

KEY = "k"


def _pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return by_kind(render(obj, hmac_key=KEY), "Pod")


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "engine")


def test_reference_pods_wait_for_the_deadline_and_the_lease() -> None:
    # defaults: deadline 10 s + lease 30 s, then the shutdown margin
    for pod in _pods(body()):
        assert pod["spec"]["terminationGracePeriodSeconds"] == 40 + SHUTDOWN_MARGIN_S
        drain = _engine(pod)["lifecycle"]["preStop"]["exec"]["command"]
        assert drain == ["disagg", "worker", "drain", "--timeout-s", "40"]


def test_fractional_seconds_round_up() -> None:
    obj = body(kvTransfer={"transferDeadlineSeconds": 2.5, "blockLeaseSeconds": 7.2})
    for pod in _pods(obj):
        assert pod["spec"]["terminationGracePeriodSeconds"] == 10 + SHUTDOWN_MARGIN_S
        assert _engine(pod)["lifecycle"]["preStop"]["exec"]["command"][-1] == "10"


def test_the_drain_reads_the_port_the_engine_serves() -> None:
    obj = body(
        llmd={"enabled": True, "routingSidecar": {"enabled": True, "image": "x:1"}},
    )
    decode = next(p for p in _pods(obj) if "-decode-" in p["metadata"]["name"])
    env = env_of(_engine(decode))
    port = _engine(decode)["ports"][0]["containerPort"]
    assert env["DISAGG_HTTP_PORT"] == str(port)


def test_vllm_pods_sleep_through_the_lease() -> None:
    obj = vllm_gpu_cpu(kvTransfer={"blockLeaseSeconds": 45})
    for pod in _pods(obj):
        assert pod["spec"]["terminationGracePeriodSeconds"] == 45 + SHUTDOWN_MARGIN_S
        assert _engine(pod)["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", "45"]}}


def test_the_drain_ends_before_the_grace_period() -> None:
    for obj in (body(), vllm_gpu_cpu(), body(prefill=role(replicas=2))):
        for pod in _pods(obj):
            timeout = int(_engine(pod)["lifecycle"]["preStop"]["exec"]["command"][-1])
            assert timeout < pod["spec"]["terminationGracePeriodSeconds"]


def test_the_derivation_lists_the_grace_period() -> None:
    values = {row[0] for row in derivation.derivation_rows()}
    assert {"terminationGracePeriodSeconds", "preStop"} <= values


def test_a_roles_drain_seconds_raises_its_wait_and_grace_for_long_generations() -> None:
    """A decode pod serving 10-minute generations: its preStop waits 600 s, not the lease;
    prefill keeps the derived drain; a value below the derived one changes nothing."""
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["drainSeconds"] = 600
    pods = {p["metadata"]["labels"]["disagg.dev/role"]: p for p in _pods(obj)}
    decode, prefill = pods["decode"], pods["prefill"]
    assert _engine(decode)["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "600"]
    assert decode["spec"]["terminationGracePeriodSeconds"] == 600 + SHUTDOWN_MARGIN_S
    assert _engine(prefill)["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", "30"]
    low = body(decode=role(drainSeconds=5))  # below the derived 40 s
    for pod in _pods(low):
        assert _engine(pod)["lifecycle"]["preStop"]["exec"]["command"][-1] == "40"
    ref = body(decode=role(drainSeconds=120))
    decode = next(p for p in _pods(ref) if p["metadata"]["labels"]["disagg.dev/role"] == "decode")
    assert _engine(decode)["lifecycle"]["preStop"]["exec"]["command"][-2:] == ["--timeout-s", "120"]
