"""vLLM's local-run part: the aggregated baseline of a vLLM deployment (``disagg up``'s
judge) is the decode pod's rendered command less its KV connector, and nothing else
changed; the local image of a rendered vLLM image is the vllm-cpu build of its version."""

from __future__ import annotations

from disagg_operator.engines.settings import BUILTIN_ENGINES
from disagg_operator.render.objects import render
from disagg_tools.local.engines import BUILTIN, local_engine
from tests.operator.builders import body, by_kind, role


def test_every_builtin_engine_has_a_local_run_part_under_its_name() -> None:
    assert sorted(BUILTIN) == sorted(BUILTIN_ENGINES)
    assert all(local_engine(name).name == name for name in BUILTIN_ENGINES)


def test_the_aggregated_engine_is_the_decode_command_without_its_connector() -> None:
    cpu = {"limits": {"cpu": "8", "memory": "16Gi"}}
    spec = body(engine="vllm", prefill=role(resources=cpu), decode=role(resources=cpu))
    objects = render(spec, hmac_key="k")
    decode = by_kind(objects, "Pod")[-1]["spec"]["containers"][0]["command"]
    at = decode.index("--kv-transfer-config")
    alone = local_engine("vllm").aggregated(decode)
    assert alone == decode[:at] + decode[at + 2 :]
    assert local_engine("reference").aggregated(decode) == decode  # its default: as rendered


def test_a_rendered_vllm_image_runs_as_the_vllm_cpu_build_of_its_version() -> None:
    vllm = local_engine("vllm")
    assert vllm.image("vllm/vllm-openai:v0.11.0").endswith("/disagg-vllm-cpu:0.11.0")
    canary = vllm.image("ghcr.io/disagg-dev/disagg-worker-cpu:9")  # the canary: the worker's
    assert canary == local_engine("reference").image("any")
