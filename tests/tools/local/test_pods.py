"""Rendered pods → local processes: what changes for one host (vLLM pods most), and nothing
else."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.render.objects import render
from disagg_tools.local.engines import local_engine
from disagg_tools.local.rules.pods import (
    UpError,
    core_takers,
    local_pods,
    share_cores,
)
from disagg_tools.local.stack import render_manifest
from tests.operator.builders import env_of, spanning

VLLM, REFERENCE = local_engine("vllm"), local_engine("reference")

ROOT = Path(__file__).resolve().parents[3]
VLLM_CPU = ROOT / "examples" / "vllm-cpu.yaml"
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
CLAIMS = {"models": "/data/models"}  # the local folder standing for the example's claim


def _addresses() -> Callable[[str], str]:
    """Pod addresses as a run hands them out: each pod its own, the same for its name."""
    given: dict[str, str] = {}
    return lambda name: given.setdefault(name, f"127.0.9.{2 + len(given)}")


def _rendered(path: Path = VLLM_CPU) -> list[dict[str, Any]]:
    body = yaml.safe_load(path.read_text())
    body["metadata"].update(namespace="default", uid="u")
    return render(body, hmac_key="k")


def _engine(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    pod = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == name)
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def test_vllm_pods_keep_their_rendered_flags_and_env() -> None:
    objects = _rendered()
    pods = local_pods(
        objects,
        VLLM,
        "/s",
        addresses=_addresses(),
        cores=[[0], [2, 3]],
        claims=CLAIMS,
    )
    assert [(p.role, p.local) for p in pods] == [("prefill", VLLM.run), ("decode", VLLM.run)]
    for pod, cores in zip(pods, ("0", "2,3"), strict=True):
        container = _engine(objects, pod.name)
        rendered = container["command"] + container.get("args", [])
        assert pod.argv[:3] == [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
        # the claim's mount point is the claim's local folder
        assert rendered[2] == "/mnt/models/tiny-llama"
        assert pod.argv[3:5] == ["--model", "/data/models/tiny-llama"]
        assert "claim models (mounted at /mnt/models) → /data/models" in pod.adapted
        # the NIXL idle shim's ConfigMap volume is the engine's PYTHONPATH here too, its
        # folder holding the ConfigMap's files
        assert pod.env["PYTHONPATH"] == f"/s/pods/{pod.name}/engine-idle"
        (idle,) = [v for v in pod.volumes if v.name == "engine-idle"]
        config_map = next(o for o in objects if o["kind"] == "ConfigMap")
        assert {k: d.decode() for k, (d, _) in idle.files.items()} == config_map["data"]
        assert pod.env["DISAGG_NIXL_PROGRESS_DELAY_US"] == "5000"
        # every rendered flag but the port travels unchanged, the KV config included
        flags = rendered[3:]
        i = flags.index("--port")
        kept = flags[:i] + flags[i + 2 :]
        assert pod.argv[-len(kept) :] == kept
        kv = json.loads(kept[kept.index("--kv-transfer-config") + 1])
        assert kv["kv_buffer_device"] == "cpu"
        # each pod listens at its own address with its rendered ports, as in a cluster
        assert pod.argv[pod.argv.index("--port") + 1] == str(pod.http_port) == "8000"
        assert pod.argv[pod.argv.index("--host") + 1] == pod.address
        assert pod.env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == pod.address
        assert (
            pod.env["VLLM_NIXL_SIDE_CHANNEL_PORT"]
            == env_of(container)["VLLM_NIXL_SIDE_CHANNEL_PORT"]
        )
        assert pod.env["VLLM_CPU_OMP_THREADS_BIND"] == cores
        assert "UCX_TLS" not in pod.env and pod.dropped
        assert any("core(s) " + cores in note for note in pod.adapted)
    assert [p.address for p in pods] == ["127.0.9.2", "127.0.9.3"]


def test_a_claim_without_a_local_folder_or_a_model_the_cluster_fetches_is_refused() -> None:
    with pytest.raises(UpError, match="--claim models=DIR"):
        local_pods(_rendered(), VLLM, "/s", addresses=_addresses())
    without = [o for o in _rendered() if o["kind"] != "ConfigMap"]  # as a kubelet: named
    with pytest.raises(UpError, match="ConfigMap 'vllm-cpu-engine-idle' does not exist"):
        local_pods(without, VLLM, "/s", addresses=_addresses(), claims=CLAIMS)
    for model, says in (("hf://org/name", "init container"), ("oci://r.example/m:1", "image")):
        body = yaml.safe_load(VLLM_CPU.read_text())
        body["metadata"].update(namespace="default", uid="u")
        body["spec"]["model"] = model
        with pytest.raises(UpError, match=f"{says}.*--model DIR"):
            objects = render(body, hmac_key="k")
            local_pods(objects, VLLM, "/s", addresses=_addresses())


def test_without_cores_the_rendered_binding_stays() -> None:
    objects = _rendered()
    pods = local_pods(objects, VLLM, "/s", addresses=_addresses(), claims=CLAIMS)
    for pod in pods:
        env = {e["name"]: e.get("value") for e in _engine(objects, pod.name)["env"]}
        assert pod.env["VLLM_CPU_OMP_THREADS_BIND"] == env["VLLM_CPU_OMP_THREADS_BIND"]


def test_only_an_engine_that_takes_core_lists_gets_cores() -> None:
    assert core_takers(_rendered(), VLLM) == 2
    assert core_takers(_rendered(QUICKSTART), REFERENCE) == 0
    pods = local_pods(
        _rendered(QUICKSTART), REFERENCE, "/s", addresses=_addresses(), cores=[[0], [1]]
    )
    assert all("DISAGG_CPU" not in " ".join(p.adapted) for p in pods)
    assert all(p.env == {**p.env} and "VLLM_CPU_OMP_THREADS_BIND" not in p.env for p in pods)


@pytest.mark.parametrize(
    ("count", "cores", "expected"),
    [
        (2, [0, 1], [[0], [1]]),
        (2, [0, 1, 2, 3], [[0, 1], [2, 3]]),
        (2, [4, 5, 6], [[4], [5]]),
        (3, [0, 1], [[0], [1], [0]]),
        (0, [0, 1], []),
    ],
)
def test_share_cores_is_disjoint_when_it_can_be(
    count: int, cores: list[int], expected: list[list[int]]
) -> None:
    assert share_cores(count, cores) == expected


def test_a_reference_worker_listens_at_its_pods_address_with_its_rendered_ports() -> None:
    """A restart binds what the first process bound: the proxy's URLs and the side channel
    prefill advertises stay valid."""
    objects = _rendered(QUICKSTART)
    prefill, decode = local_pods(objects, REFERENCE, "/s", addresses=_addresses())
    for pod in (prefill, decode):
        container = _engine(objects, pod.name)
        for key in ("DISAGG_HTTP_HOST", "DISAGG_SIDE_CHANNEL_HOST", "DISAGG_ADVERTISE_HOST"):
            assert pod.env[key] == pod.address
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert pod.http_port == ports["http"]  # the worker's defaults are the rendered ports
        assert {k: v for k, v in pod.env.items() if k.endswith("_PORT")} == {
            k: v for k, v in env_of(container).items() if k.endswith("_PORT")
        }
    assert prefill.address != decode.address


def test_a_tensor_parallel_vllm_pod_binds_one_core_list_per_rank() -> None:
    """vLLM's CPU worker wants a list per rank ("a|b"): decode TP 2 on the cores the pod
    gets, split evenly, or the one core reused when it has fewer cores than ranks."""
    body = yaml.safe_load(VLLM_CPU.read_text())
    body["metadata"].update(namespace="default", uid="u")
    body["spec"]["decode"]["tensorParallelSize"] = 2
    body["spec"]["decode"]["resources"]["limits"].update(cpu="4", memory="10Gi")
    body["spec"]["decode"]["resources"]["requests"]["memory"] = "10Gi"
    objects = render(body, hmac_key="k")
    for cores, bound in (([2, 3], "2|3"), ([1], "1|1"), ([0, 1, 2, 3], "0,1|2,3")):
        pods = local_pods(objects, VLLM, "/s", addresses=_addresses(), cores=[[0], cores],
            claims=CLAIMS,
        )  # fmt: skip
        assert pods[0].env["VLLM_CPU_OMP_THREADS_BIND"] == "0"  # prefill: TP 1
        assert pods[1].env["VLLM_CPU_OMP_THREADS_BIND"] == bound
        assert "--tensor-parallel-size" in pods[1].argv


def test_a_local_run_refuses_instances_that_span_pods_and_says_what_runs_here() -> None:
    obj = spanning()
    with pytest.raises(UpError, match=r"demo-prefill-0.*set nodesPerInstance: 1 to run here"):
        render_manifest(obj, hmac_key="k" * 32)


def test_dollar_references_in_rendered_args_are_expanded() -> None:
    """The KV-events topic names the pod's side-channel host through $(VAR), which a
    kubelet expands: a local process gets the value, not the reference. vLLM binds its
    events on every address (and connects to any other endpoint), so on one host each
    engine binds a port of its own, and the run says where to read them."""
    body = yaml.safe_load(VLLM_CPU.read_text())
    body["metadata"].update(namespace="default", uid="u")
    body["spec"]["routing"] = {"prefixIndex": "events"}
    objects = render(body, hmac_key="k")
    engine = _engine(objects, "vllm-cpu-decode-0")
    rendered = " ".join([*engine["command"], *engine.get("args", [])])
    assert "$(" in rendered and "tcp://*:5557" in rendered  # the kubelet's to expand
    pods = local_pods(objects, VLLM, "/s", addresses=_addresses(), host_ports=itertools.count(9500),
        claims=CLAIMS,
    )  # fmt: skip
    for pod, port in zip(pods, (9500, 9501), strict=True):
        events = json.loads(pod.argv[pod.argv.index("--kv-events-config") + 1])
        assert events["topic"].startswith(f"kv@{pod.address}@")  # its own address
        assert events["endpoint"] == f"tcp://*:{port}"
        assert pod.events == f"tcp://{pod.address}:{port}"
    # without host ports (the local kubelet) the rendered port stays
    (decode,) = [p for p in local_pods(objects, VLLM, "/s", addresses=_addresses(), claims=CLAIMS
    ) if p.role == "decode"]  # fmt: skip
    assert decode.events == f"tcp://{decode.address}:5557"
