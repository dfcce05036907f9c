"""Probes for real models: the start budget follows the model's size or a field, readiness
has an explicit timeout, and liveness asks the engine's /health with room for a busy one."""

from __future__ import annotations

from typing import Any

from disagg_operator.derive import model
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, role, vllm_gpu_cpu

KEY = "k" * 32


def _engine(obj: dict[str, Any], role_name: str = "prefill") -> dict[str, Any]:
    dd, problems = validation.parse(obj)
    assert dd is not None and not problems, problems
    pods = by_kind(render(obj, hmac_key=KEY), "Pod")
    pod = next(p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == role_name)
    engine: dict[str, Any] = pod["spec"]["containers"][0]
    return engine


def _budget(engine: dict[str, Any]) -> int:
    startup = engine["startupProbe"]
    return int(startup["periodSeconds"] * startup["failureThreshold"])


def _sized(weights: str, **spec: Any) -> dict[str, Any]:
    obj = vllm_gpu_cpu(modelConfig={"weightsMemory": weights}, **spec)
    obj["spec"]["decode"]["resources"]["limits"]["memory"] = "200Gi"  # a CPU decode holds it
    return obj


def test_a_vllm_start_budget_grows_with_the_weights() -> None:
    small = _engine(_sized("1Gi"))
    large = _engine(_sized("140Gi"))
    unknown = _engine(vllm_gpu_cpu())
    # 10 min, plus the weights at 100 MB/s and, for a hub id the engine downloads, 25 MB/s
    per_gib = 2**30 * (1 / model.LOAD_BYTES_PER_S + 1 / model.DOWNLOAD_BYTES_PER_S)
    assert _budget(small) == 10 * ((600 + int(per_gib)) // 10 + 1)
    assert _budget(large) >= 600 + 140 * per_gib  # a 70B model: over an hour here
    assert _budget(unknown) == model.START_UNKNOWN_S
    mounted = _sized("140Gi", model="pvc://models/llama")
    assert _budget(_engine(mounted)) < _budget(large)  # no download: the volume's read only


def test_a_field_sets_the_start_budget_for_any_engine() -> None:
    obj = vllm_gpu_cpu()
    obj["spec"]["prefill"]["startupSeconds"] = 5400
    assert _budget(_engine(obj)) == 5400
    assert _budget(_engine(body())) == 120  # the reference engine: seconds, not minutes
    assert _budget(_engine(body(prefill=role(startupSeconds=30)))) == 30
    _, problems = validation.parse(body(prefill=role(startupSeconds=5)))
    assert [p.field for p in problems] == ["spec.prefill.startupSeconds"]


def test_readiness_times_out_explicitly_and_liveness_waits_out_a_busy_engine() -> None:
    for engine in (_engine(body()), _engine(vllm_gpu_cpu())):
        ready, alive = engine["readinessProbe"], engine["livenessProbe"]
        assert ready["timeoutSeconds"] == 5
        assert alive["httpGet"]["path"] == "/health"
        assert alive["httpGet"]["port"] == engine["ports"][0]["containerPort"]
        # two minutes without an answer before a restart
        assert alive["periodSeconds"] * alive["failureThreshold"] == 120
        assert alive["timeoutSeconds"] == 10
