"""TransferPathReady from the decode pods' transfer-canary container statuses (the latch)
and what their canaries answered (the path now), and the render side that puts the canary
there."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

from disagg_operator.api import CANARY_PORT, ENGINE_BEHIND_SIDECAR_PORT, HTTP_PORT
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.planning import status
from disagg_operator.planning.transfer_path import Said, condition, to_ask
from disagg_operator.render import canary, kvkey
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, role
from tests.operator.planning.test_status import T0, _compute, _cond


def _pods(obj: dict[str, Any], settings: Settings = DEFAULT) -> list[dict[str, Any]]:
    return by_kind(render(obj, hmac_key="k", settings=settings), "Pod")


def _decode(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == "decode"]


def _running(pods: list[dict[str, Any]], canary_ready: dict[str, bool]) -> list[dict[str, Any]]:
    """Observed pods: Running, each container's status; the canary's from ``canary_ready``
    (by pod name, default True)."""
    out = copy.deepcopy(pods)
    for pod in out:
        statuses = [
            {"name": c["name"], "ready": canary_ready.get(pod["metadata"]["name"], True)}
            if c["name"] == canary.NAME
            else {"name": c["name"], "ready": True}
            for c in pod["spec"]["containers"]
        ]
        pod["status"] = {"phase": "Running", "containerStatuses": statuses}
    return out


def _spec(obj: dict[str, Any]) -> Any:
    dd, problems = validation.parse(obj)
    assert dd is not None and not problems
    return dd.spec


# The operator's --canary-image, as a value.
WITH_CANARY = Settings(canary_image="example.com/disagg-worker:1")


def test_every_decode_pod_gets_the_canary_and_prefill_pods_its_wire_peer() -> None:
    obj = body(decode=role(replicas=2), kvTransfer={"transferDeadlineSeconds": 20})
    pods = _pods(obj)
    for pod in pods:
        names = [c["name"] for c in pod["spec"]["containers"]]
        is_decode = pod["metadata"]["labels"]["disagg.dev/role"] == "decode"
        assert names == ["engine", canary.NAME if is_decode else canary.WIRE_PEER]
    c = _decode(pods)[0]["spec"]["containers"][1]
    assert c["image"] == "example.com/reference:1"  # the reference image has `disagg`
    assert c["command"] == ["disagg", "worker", "canary"]
    args = dict(zip(c["args"][::2], c["args"][1::2], strict=True))
    kv = pods[0]["metadata"]["labels"]["disagg.dev/kv-revision"]
    assert args["--prefill"] == f"http://demo-p-{kv}:{HTTP_PORT}"  # its own revision's
    assert args["--decode"] == f"http://127.0.0.1:{HTTP_PORT}"
    assert args["--model"] == "tiny" and args["--port"] == str(CANARY_PORT)
    # deadline 20 s: T = 25, interval 12, fresh 75; the probe waits T + 2
    assert (args["--timeout-s"], args["--interval-s"], args["--fresh-s"]) == ("25", "12", "75")
    # the gate is the engine container's (a restarted engine is unready until it passes)
    assert _decode(pods)[0]["spec"]["containers"][0]["readinessProbe"] == {
        "httpGet": {"path": "/ready", "port": CANARY_PORT},
        "periodSeconds": 25,
        "timeoutSeconds": 27,
        "failureThreshold": 2,
    }
    assert "readinessProbe" not in c
    # an HTTP client that writes nothing: a read-only root, no /tmp needed
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert "volumeMounts" not in c
    assert c["resources"]["requests"] == {"cpu": "10m", "memory": "64Mi"}


def test_the_prefill_url_is_one_function() -> None:
    """The canary reaches the prefill pods of its own KV revision, through the headless
    Service render makes for that revision (not the role Service, which follows the
    routed revision)."""
    obj = body()
    spec = _spec(obj)
    kv = kvkey.kv_revision(spec, DEFAULT)
    assert canary.prefill_url("demo", kv) == f"http://demo-p-{kv}:8000"
    services = {s["metadata"]["name"]: s for s in by_kind(render(obj, hmac_key="k"), "Service")}
    selector = services[f"demo-p-{kv}"]["spec"]["selector"]
    assert selector == {
        "disagg.dev/deployment": "demo",
        "disagg.dev/role": "prefill",
        "disagg.dev/kv-revision": kv,
    }


def test_the_decode_image_override_is_the_canary_image() -> None:
    c = _decode(_pods(body(decode=role(image="example.com/mine:2"))))[0]["spec"]["containers"]
    assert c[1]["image"] == "example.com/mine:2"


def test_vllm_needs_a_canary_image() -> None:
    c = _decode(_pods(body(engine="vllm"), WITH_CANARY))[0]["spec"]["containers"]
    assert c[1]["image"] == "example.com/disagg-worker:1"  # the operator's --canary-image
    given = body(engine="vllm", transferCanary={"image": "example.com/other:3"})
    assert _decode(_pods(given))[0]["spec"]["containers"][1]["image"] == "example.com/other:3"
    # the reference engine's own image has `disagg`: the setting does not replace it
    ref = _decode(_pods(body(), WITH_CANARY))[0]["spec"]["containers"]
    assert ref[1]["image"] == "example.com/reference:1"


def test_vllm_without_a_canary_image_renders_none_and_says_so() -> None:
    obj = body(engine="vllm")
    pods = _pods(obj)
    assert [c["name"] for c in _decode(pods)[0]["spec"]["containers"]] == ["engine"]
    found = _cond(_compute(obj, _running(pods, {})), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("Unknown", "NoCanaryImage")
    assert "spec.transferCanary.image" in found["message"] and "--canary-image" in found["message"]


def test_behind_the_routing_sidecar_the_canary_calls_the_engine_port() -> None:
    llmd = {"enabled": True, "routingSidecar": {"enabled": True, "image": "example.com/s:1"}}
    pod = _decode(_pods(body(llmd=llmd)))[0]
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == canary.NAME]
    assert f"http://127.0.0.1:{ENGINE_BEHIND_SIDECAR_PORT}" in c["args"]


def test_disabled_canary_renders_nothing_and_says_so() -> None:
    obj = body(transferCanary={"enabled": False})
    pods = _pods(obj)
    assert all(len(p["spec"]["containers"]) == 1 for p in pods)
    found = _cond(_compute(obj, _running(pods, {})), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("Unknown", "CanaryDisabled")


def test_passing_when_every_running_decode_pods_canary_is_ready() -> None:
    obj = body(decode=role(replicas=3))
    found = _cond(_compute(obj, _running(_pods(obj), {})), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("True", "CanaryPassing")
    assert "(3)" in found["message"]


def test_failing_names_the_pods_whose_canary_is_not_ready() -> None:
    obj = body(decode=role(replicas=3))
    pods = _running(_pods(obj), {"demo-decode-1": False})
    found = _cond(_compute(obj, pods), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("False", "CanaryFailing")
    assert "1 of 3 decode pod(s): demo-decode-1." in found["message"]
    assert "kubectl logs POD -c transfer-canary" in found["message"]


def _failed(problem: str) -> Said:
    return Said(False, f"the last canary failed: {problem}")


def test_a_canary_that_says_decode_recomputed_sets_the_reason() -> None:
    obj = body(decode=role(replicas=3))
    pods = _running(_pods(obj), {"demo-decode-1": False, "demo-decode-2": False})
    said = {
        "demo-decode-1": _failed("DecodeRecomputing: decode computed ..."),
        "demo-decode-2": _failed("prefill http://p:8000: boom"),
    }
    found = condition(_spec(obj), pods, DEFAULT, said=said)
    assert found[:2] == ("False", "DecodeRecomputing")
    assert "1 of 3 decode pod(s): demo-decode-1:" in found[2]
    assert said["demo-decode-1"].reason in found[2]
    # a reason that is not one the condition names: the canary just fails, in its words
    other = {"demo-decode-2": said["demo-decode-2"]}
    found = condition(_spec(obj), pods, DEFAULT, said=other)
    assert found[1] == "CanaryFailing" and found[2].endswith(
        f"say: {other['demo-decode-2'].reason}"
    )
    assert condition(_spec(obj), pods, DEFAULT)[1] == "CanaryFailing"
    # a Ready (latched) pod whose canary fails now counts: readiness is not the path
    ready = _running(_pods(obj), {})
    assert condition(_spec(obj), ready, DEFAULT, said=said)[1] == "DecodeRecomputing"
    passing = {n: Said(True, "the last canary passed 1 s ago in 9 ms") for n in said}
    assert condition(_spec(obj), ready, DEFAULT, said=passing)[1] == "CanaryPassing"


def test_a_busy_or_absent_prefill_pool_is_named_while_decode_pods_stay_ready() -> None:
    obj = body(decode=role(replicas=3))
    ready = _running(_pods(obj), {})  # every canary latched: the pods serve
    busy = _failed("PrefillBusy: prefill http://demo-p-x:8000/v1/completions: no answer ...")
    gone = _failed("PrefillUnreachable: prefill http://demo-p-x:8000/v1/completions: cannot ...")
    found = condition(_spec(obj), ready, DEFAULT, said={"demo-decode-0": busy})
    assert found[:2] == ("False", "PrefillBusy")
    assert "1 of 3 decode pod(s): demo-decode-0: it is saturated" in found[2]
    assert "decode pods stay Ready" in found[2] and found[2].endswith(busy.reason)
    found = condition(
        _spec(obj), ready, DEFAULT, said={"demo-decode-1": gone, "demo-decode-2": gone}
    )
    assert found[:2] == ("False", "PrefillUnreachable")
    assert "2 of 3 decode pod(s): demo-decode-1, demo-decode-2: none is Ready" in found[2]
    assert status.REASONS["TransferPathReady"] >= {"PrefillBusy", "PrefillUnreachable"}


def test_ready_pods_whose_canaries_never_answer_are_unknown_not_passing() -> None:
    obj = body(decode=role(replicas=2))
    ready = _running(_pods(obj), {})
    found = condition(_spec(obj), ready, DEFAULT, said={})
    assert found[:2] == ("Unknown", "CanaryUnanswered")
    assert f"GET :{CANARY_PORT}/verdict" in found[2]
    # one answer is enough to judge; not asked at all (no reader): the latches decide
    one = {"demo-decode-1": Said(True, "the last canary passed 2 s ago in 8 ms")}
    assert condition(_spec(obj), ready, DEFAULT, said=one)[:2] == ("True", "CanaryPassing")
    assert condition(_spec(obj), ready, DEFAULT)[:2] == ("True", "CanaryPassing")


def test_a_canary_that_says_its_kv_moved_below_the_floor_sets_slow_transport() -> None:
    obj = body(decode=role(replicas=3), transferCanary={"minBandwidthGbytesPerSecond": 5})
    # a slow canary passes (its pod serves), and says so: the operator asked it
    pods = _running(_pods(obj), {})
    slow = Said(
        True,
        "SlowTransport: the KV moved at 0.131 GB/s (65536 bytes in 0.5 ms), below the floor "
        "of 5 GB/s; check the RDMA device, UCX_TLS and UCX_NET_DEVICES (the last canary "
        "passed 1 s ago in 12 ms)",
    )
    said = {"demo-decode-0": slow, "demo-decode-2": slow}
    found = condition(_spec(obj), pods, DEFAULT, said=said)
    assert found[:2] == ("False", "SlowTransport")
    assert "2 of 3 decode pod(s): demo-decode-0, demo-decode-2:" in found[2]
    assert found[2].endswith(f"Their canaries say: {slow.reason}")  # the figures
    assert status.REASONS["TransferPathReady"] >= {"SlowTransport"}
    # a decode that recomputed says more (no KV moved at all): it wins
    failing = _running(_pods(obj), {"demo-decode-2": False})
    both = {**said, "demo-decode-2": _failed("DecodeRecomputing: ...")}
    assert condition(_spec(obj), failing, DEFAULT, said=both)[1] == "DecodeRecomputing"


def test_the_canaries_asked_are_the_unproven_first_then_the_proven_turn_by_turn() -> None:
    obj = body(decode=role(replicas=5))
    pods = _running(_pods(obj), {"demo-decode-3": False})

    def asked(limit: int, turn: int) -> list[str]:
        return [p["metadata"]["name"][-1] for p in to_ask(pods, limit, turn)]

    assert asked(8, 0) == ["3", "0", "1", "2", "4"]
    assert asked(3, 0) == ["3", "0", "1"]
    assert asked(3, 1) == ["3", "1", "2"]
    assert asked(3, 3) == ["3", "4", "0"]
    # over len(proven) turns every proven pod is asked
    assert {n for t in range(4) for n in asked(2, t)} == {"0", "1", "2", "3", "4"}
    # prefill pods and pods not running are never asked
    prefill = [p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == "prefill"]
    assert to_ask(prefill, 8) == []


def test_failing_lists_five_pods_then_how_many_more() -> None:
    obj = body(decode=role(replicas=8))
    pods = _running(_pods(obj), {f"demo-decode-{i}": False for i in range(8)})
    message = _cond(_compute(obj, pods), "TransferPathReady")["message"]
    assert (
        "demo-decode-0, demo-decode-1, demo-decode-2, demo-decode-3, demo-decode-4 and 3 more"
        in message
    )
    assert "demo-decode-5" not in message


def test_pods_not_running_deleted_or_without_a_canary_status_are_left_out() -> None:
    obj = body(decode=role(replicas=3))
    pods = _running(_pods(obj), {"demo-decode-0": False, "demo-decode-1": False})
    decode = _decode(pods)
    decode[0]["status"]["phase"] = "Pending"
    decode[1]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    found = _cond(_compute(obj, pods), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("True", "CanaryPassing")
    decode[2]["status"]["containerStatuses"] = decode[2]["status"]["containerStatuses"][:1]
    found = _cond(_compute(obj, pods), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("Unknown", "NoDecodePods")


def test_no_decode_pods_and_invalid_specs_are_unknown() -> None:
    obj = body(decode=role(replicas=0))
    found = _cond(_compute(obj, _running(_pods(obj), {})), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("Unknown", "NoDecodePods")
    assert condition(None, [], DEFAULT) == (
        "Unknown",
        "InvalidSpec",
        "Nothing is checked until the spec is fixed.",
    )
    bad = body(prefill=role(tensorParallelSize=3))  # does not split the preset's heads
    found = _cond(_compute(bad, []), "TransferPathReady")
    assert (found["status"], found["reason"]) == ("Unknown", "InvalidSpec")


def test_the_condition_comes_last_and_moves_its_time_only_on_a_flip() -> None:
    obj = body()
    pods = _pods(obj)
    first = _compute(obj, _running(pods, {}))
    assert first["conditions"][-1]["type"] == "TransferPathReady"
    later = T0 + timedelta(minutes=5)
    same = _compute(obj, _running(pods, {}), previous=first, now=later)
    assert _cond(same, "TransferPathReady") == _cond(first, "TransferPathReady")
    failing = _compute(obj, _running(pods, {"demo-decode-0": False}), previous=first, now=later)
    moved = _cond(failing, "TransferPathReady")
    assert moved["status"] == "False" and moved["lastTransitionTime"] == "2026-01-01T12:05:00Z"
    assert _cond(failing, "Progressing")["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert status.REASONS["TransferPathReady"] >= {moved["reason"]}


def test_a_canary_that_found_an_unexpected_wire_sets_unexpected_transport() -> None:
    from disagg_worker.serve.rules.canary_verdict import Result, verdict
    from disagg_worker.serve.rules.canary_wire import Wire, transport_problem

    obj = body(decode=role(replicas=2), transferCanary={"minBandwidthGbytesPerSecond": 5})
    pods = _running(_pods(obj), {})
    # what a canary says (its own rules): tcp where the derivation expects shared memory,
    # and slow as well; the wire is named first, and it is the condition's reason
    tcp = Wire("intra-node", "tcp", "tcp/lo software emulation (intra-node)")
    odd = transport_problem(tcp, {"intra-node": ("shared-memory",)})
    slow = "SlowTransport: the KV moved at 0.131 GB/s"
    said = verdict(Result(9.0, 12.0, None, None, slow, wire=tcp, odd=odd), 10.0, 30.0)
    assert said.ready and odd is not None
    found = condition(_spec(obj), pods, DEFAULT, said={"demo-decode-1": Said(True, said.reason)})
    assert found[:2] == ("False", "UnexpectedTransport")
    assert "1 of 2 decode pod(s): demo-decode-1:" in found[2]
    # the message names both: what UCX chose and what was expected
    assert "over tcp (tcp/lo software emulation (intra-node))" in found[2]
    assert "expects shared-memory for an intra-node peer" in found[2]
    assert status.REASONS["TransferPathReady"] >= {"UnexpectedTransport"}
