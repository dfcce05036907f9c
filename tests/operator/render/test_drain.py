"""Pod termination: a grace period long enough for in-flight KV transfers, and a preStop
that drains the engine before SIGTERM."""

from __future__ import annotations

from typing import Any

from disagg_operator.derive.scaling import DNS_TTL_S, ENDPOINTS_PROPAGATION_S, ROUTER_REFRESH_S
from disagg_operator.render import derivation
from disagg_operator.render.objects import render
from disagg_operator.render.pods import SHUTDOWN_MARGIN_S
from tests.operator.builders import body, by_kind, env_of, role, vllm_gpu_cpu

KEY = "k"


def _pods(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return by_kind(render(obj, hmac_key=KEY), "Pod")


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "engine")


def test_reference_pods_settle_then_wait_for_the_deadline_and_the_lease() -> None:
    # defaults: the settle, deadline 10 s + lease 30 s, then the shutdown margin
    settle = ENDPOINTS_PROPAGATION_S
    for pod in _pods(body()):
        assert pod["spec"]["terminationGracePeriodSeconds"] == settle + 40 + SHUTDOWN_MARGIN_S
        drain = _engine(pod)["lifecycle"]["preStop"]["exec"]["command"]
        assert drain == [
            "disagg",
            "worker",
            "drain",
            "--settle-s",
            str(settle),
            "--timeout-s",
            "40",
        ]


def test_behind_the_router_pods_serve_on_until_its_next_resolve_has_seen_them_leave() -> None:
    """The router resolves its Services every ROUTER_REFRESH_S through DNS answers cached
    DNS_TTL_S: a pod that left its endpoints may get its work that long."""
    settle = ROUTER_REFRESH_S + DNS_TTL_S
    routed = {"enabled": True, "image": "example.com/disagg-worker:1"}
    for obj in (body(router=routed), vllm_gpu_cpu(router=routed)):
        for pod in _pods(obj):
            drain = _engine(pod)["lifecycle"]["preStop"]["exec"]["command"]
            grace = pod["spec"]["terminationGracePeriodSeconds"]
            if drain[0] == "sleep":  # vLLM: the settle, then its lease
                assert (
                    drain == ["sleep", str(settle + 30)]
                    and grace == settle + 30 + SHUTDOWN_MARGIN_S
                )
            else:
                assert drain[drain.index("--settle-s") + 1] == str(settle)
                assert grace == settle + 40 + SHUTDOWN_MARGIN_S


def test_fractional_seconds_round_up() -> None:
    obj = body(kvTransfer={"transferDeadlineSeconds": 2.5, "blockLeaseSeconds": 7.2})
    for pod in _pods(obj):
        grace = pod["spec"]["terminationGracePeriodSeconds"]
        assert grace == ENDPOINTS_PROPAGATION_S + 10 + SHUTDOWN_MARGIN_S
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
        wait = ENDPOINTS_PROPAGATION_S + 45
        assert pod["spec"]["terminationGracePeriodSeconds"] == wait + SHUTDOWN_MARGIN_S
        assert _engine(pod)["lifecycle"]["preStop"] == {"exec": {"command": ["sleep", str(wait)]}}


def test_the_drain_ends_before_the_grace_period() -> None:
    routed = body(router={"enabled": True, "image": "example.com/disagg-worker:1"})
    for obj in (body(), vllm_gpu_cpu(), body(prefill=role(replicas=2)), routed):
        for pod in _pods(obj):
            command = _engine(pod)["lifecycle"]["preStop"]["exec"]["command"]
            settle = int(command[command.index("--settle-s") + 1]) if "--settle-s" in command else 0
            assert settle + int(command[-1]) < pod["spec"]["terminationGracePeriodSeconds"]


def test_the_derivation_lists_the_grace_period() -> None:
    values = {row[0] for row in derivation.derivation_rows()}
    assert {"terminationGracePeriodSeconds", "preStop", "preStop settle"} <= values


def test_a_roles_drain_seconds_raises_its_wait_and_grace_for_long_generations() -> None:
    """A decode pod serving 10-minute generations: its preStop waits 600 s, not the lease;
    prefill keeps the derived drain; a value below the derived one changes nothing."""
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["drainSeconds"] = 600
    pods = {p["metadata"]["labels"]["disagg.dev/role"]: p for p in _pods(obj)}
    decode, prefill = pods["decode"], pods["prefill"]
    settle = ENDPOINTS_PROPAGATION_S
    assert _engine(decode)["lifecycle"]["preStop"]["exec"]["command"] == [
        "sleep",
        str(settle + 600),
    ]
    assert decode["spec"]["terminationGracePeriodSeconds"] == settle + 600 + SHUTDOWN_MARGIN_S
    prefill_drain = _engine(prefill)["lifecycle"]["preStop"]["exec"]["command"]
    assert prefill_drain == ["sleep", str(settle + 30)]
    low = body(decode=role(drainSeconds=5))  # below the derived 40 s
    for pod in _pods(low):
        assert _engine(pod)["lifecycle"]["preStop"]["exec"]["command"][-1] == "40"
    ref = body(decode=role(drainSeconds=120))
    decode = next(p for p in _pods(ref) if p["metadata"]["labels"]["disagg.dev/role"] == "decode")
    assert _engine(decode)["lifecycle"]["preStop"]["exec"]["command"][-2:] == ["--timeout-s", "120"]
