"""examples/: each renders through `disagg render`, and every object passes validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from disagg_operator.commands import render as render_cli
from disagg_operator.contracts import prometheus
from disagg_operator.validation import spec as validation
from tests.operator import disruption
from tests.operator.builders import EXAMPLES, ROOT, as_built_in, by_kind, example


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = render_cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_three_examples_exist() -> None:
    assert {p.name for p in EXAMPLES} >= {
        "quickstart-cpu.yaml",
        "heterogeneous-gpu-cpu.yaml",
        "llm-d.yaml",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_renders_and_validates(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert validation.parse(example(path))[1] == []
    code, out, err = _cli(capsys, "-f", str(path))
    assert (code, err) == (0, "")
    assert out.startswith(render_cli.HEADER) and "&id" not in out
    objects = [d for d in yaml.safe_load_all(out) if d]
    assert objects and all(o["metadata"]["namespace"] == "default" for o in objects)
    for obj in objects:
        assert obj["metadata"]["ownerReferences"][0]["uid"] == render_cli.FAKE_UID
        if obj["kind"] != "InferencePool":
            for built_in in as_built_in(obj):
                kubernetes_validate.validate(built_in, "1.31.0", strict=True)


def _render(name: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    code, out, _ = _cli(capsys, "-f", str(ROOT / "examples" / name))
    assert code == 0
    return [d for d in yaml.safe_load_all(out) if d]


def test_quickstart_is_what_disagg_up_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pods = by_kind(_render("quickstart-cpu.yaml", capsys), "Pod")
    assert [p["metadata"]["name"] for p in pods] == ["quickstart-prefill-0", "quickstart-decode-0"]
    for pod in pods:
        engine = pod["spec"]["containers"][0]
        assert engine["command"] == ["disagg", "worker", "serve"]
        env = {e["name"]: e.get("value") for e in engine["env"]}
        assert env["DISAGG_KV_BUFFER_DEVICE"] == "cpu" and env["UCX_TLS"] == "tcp,self"


def test_heterogeneous_example(capsys: pytest.CaptureFixture[str]) -> None:
    pods = {
        p["metadata"]["name"]: p
        for p in by_kind(_render("heterogeneous-gpu-cpu.yaml", capsys), "Pod")
    }
    prefill = pods["llama-hetero-prefill-0"]
    assert prefill["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu"
    assert prefill["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert '"kv_buffer_device":"cpu"' in " ".join(prefill["spec"]["containers"][0]["command"])
    decode = pods["llama-hetero-decode-1"]["spec"]["containers"][0]
    assert decode["image"] == "ghcr.io/disagg-dev/disagg-vllm-cpu:0.32.0"  # ships NIXL
    for pod in pods.values():  # the pair check's facts, one value on both pools
        command = pod["spec"]["containers"][0]["command"]
        for flag, value in (
            ("--dtype", "bfloat16"),
            ("--kv-cache-dtype", "auto"),
            ("--block-size", "64"),
        ):
            assert command[command.index(flag) + 1] == value
    assert any(e["name"] == "VLLM_CPU_KVCACHE_SPACE" for e in decode["env"])


def test_llmd_example(capsys: pytest.CaptureFixture[str]) -> None:
    objects = _render("llm-d.yaml", capsys)
    pool = by_kind(objects, "InferencePool")[0]
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["spec"]["endpointPickerRef"] == {"name": "qwen-epp", "port": {"number": 9002}}
    decode = next(p for p in by_kind(objects, "Pod") if p["metadata"]["name"] == "qwen-decode-0")
    assert [c["name"] for c in decode["spec"]["containers"]] == ["engine", "routing-proxy"]


def test_several_files_and_a_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "-f", str(EXAMPLES[0]), "-f", str(EXAMPLES[1]), "-n", "serving")
    objects = [d for d in yaml.safe_load_all(out) if d]
    assert code == 0 and {o["metadata"]["namespace"] for o in objects} == {"serving"}
    assert len({o["metadata"]["ownerReferences"][0]["name"] for o in objects}) == 2


def test_invalid_manifest_exits_1_with_one_problem_per_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = example(ROOT / "examples" / "quickstart-cpu.yaml")
    doc["spec"]["prefill"]["device"] = "gpu"
    doc["spec"]["decode"]["kvBufferDevice"] = "cuda"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc) + "---\napiVersion: v1\nkind: ConfigMap\n")
    code, out, err = _cli(capsys, "-f", str(bad))
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("spec.prefill.device: unknown device 'gpu'")
    assert lines[1].startswith("spec.decode.kvBufferDevice: 'cuda' is not supported")
    assert lines[2].startswith("kind: 'ConfigMap' is not a DisaggregatedDeployment")
    assert len(lines) == 3


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "-f", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml" in err


AUTOSCALING = ROOT / "examples" / "autoscaling"


def _one(name: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all((AUTOSCALING / name).read_text()) if d]
    assert len(docs) == 1, name
    doc: dict[str, Any] = docs[0]
    return doc


def test_autoscaled_deployment_renders_validates_and_prefill_follows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = _one("deployment.yaml")
    assert validation.parse(example(AUTOSCALING / "deployment.yaml"))[1] == []
    code, out, err = _cli(capsys, "-f", str(AUTOSCALING / "deployment.yaml"))
    assert (code, err) == (0, "")
    objects = [d for d in yaml.safe_load_all(out) if d]
    for obj in objects:  # built-in kinds; the PodMonitors and rule: test_monitoring.py
        if obj["apiVersion"] != prometheus.API_VERSION:
            kubernetes_validate.validate(obj, "1.31.0", strict=True)
    # the pods its autoscalers scale on are scraped (the example sets spec.monitoring)
    monitors = {m["metadata"]["name"] for m in by_kind(objects, "PodMonitor")}
    assert monitors == {f"{doc['metadata']['name']}-{r}" for r in ("prefill", "decode")}
    name = doc["metadata"]["name"]
    pods = [p["metadata"]["name"] for p in by_kind(objects, "Pod")]
    assert pods == [f"{name}-prefill-0", f"{name}-decode-0", f"{name}-decode-1"]
    budgets = {b["metadata"]["name"]: b for b in by_kind(objects, "PodDisruptionBudget")}
    # 25% of 2 decode pods, rounded up: a drain takes one at a time; the one prefill pod
    # has no budget (maxUnavailable 1 of 1 could refuse nothing)
    assert list(budgets) == [f"{name}-decode"]
    pods = by_kind(objects, "Pod")
    assert disruption.disruptions_allowed(budgets[f"{name}-decode"], pods, doc) == 1


@pytest.mark.parametrize("name", ["hpa.yaml", "keda.yaml"])
def test_autoscalers_target_the_example_deployment(name: str) -> None:
    target = _one("deployment.yaml")
    scaler = _one(name)
    assert scaler["spec"]["scaleTargetRef"] == {
        "apiVersion": target["apiVersion"],
        "kind": target["kind"],
        "name": target["metadata"]["name"],
    }


def test_hpa_example_passes_the_upstream_schema() -> None:
    hpa = _one("hpa.yaml")
    kubernetes_validate.validate(hpa, "1.31.0", strict=True)
    assert hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


def test_keda_example_has_the_scaled_object_shape() -> None:
    """KEDA's CRD is not in the upstream schemas: check the fields it requires."""
    keda = _one("keda.yaml")
    assert (keda["apiVersion"], keda["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    spec = keda["spec"]
    assert spec["minReplicaCount"] <= spec["maxReplicaCount"]
    assert spec["triggers"] and all(t["type"] and t["metadata"] for t in spec["triggers"])


def test_the_slo_example_renders_its_minimums_until_the_planner_plans(
    capsys: pytest.CaptureFixture[str],
) -> None:
    doc = _one("slo.yaml")
    assert validation.parse(example(AUTOSCALING / "slo.yaml"))[1] == []
    code, out, err = _cli(capsys, "-f", str(AUTOSCALING / "slo.yaml"))
    assert (code, err) == (0, "")
    auto = doc["spec"]["autoscaling"]
    pods = [p["metadata"]["name"] for p in by_kind(list(yaml.safe_load_all(out)), "Pod")]
    name = doc["metadata"]["name"]
    want = [f"{name}-{r}-{i}" for r in ("prefill", "decode") for i in range(auto[r]["min"])]
    assert pods == want
    assert "replicas" not in doc["spec"]["prefill"] and "replicas" not in doc["spec"]["decode"]
