"""The aggregated baseline of a vLLM deployment (``disagg up``'s judge): the decode pod's
rendered command less its KV connector, and nothing else changed."""

from __future__ import annotations

from disagg_operator.engines.settings import BUILTIN_ENGINES
from disagg_operator.render.objects import render
from tests.operator.builders import body, by_kind, role


def test_the_aggregated_engine_is_the_decode_command_without_its_connector() -> None:
    cpu = {"limits": {"cpu": "8", "memory": "16Gi"}}
    spec = body(engine="vllm", prefill=role(resources=cpu), decode=role(resources=cpu))
    objects = render(spec, hmac_key="k")
    decode = by_kind(objects, "Pod")[-1]["spec"]["containers"][0]["command"]
    at = decode.index("--kv-transfer-config")
    alone = BUILTIN_ENGINES["vllm"].aggregated(decode)
    assert alone == decode[:at] + decode[at + 2 :]
    assert BUILTIN_ENGINES["reference"].aggregated(decode) == decode  # its default: as rendered
