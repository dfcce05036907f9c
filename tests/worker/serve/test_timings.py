"""Timings: the ``disagg`` object of an answer as the dict code wrote it comes back byte
for byte, typed, and a key of the wrong type is refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_worker.serve.rules.timings import ProxyFigures, Timings

# A P/D answer's ``disagg`` through the proxy, in the order the dict code wrote it
# (handlers._whole at a699118, then flow.Proxy.complete/_both adding proxy and prefill).
PD_ANSWER = {
    "engine_id": "decode-0", "role": "decode", "kv_source": "transferred",
    "prompt_ms": 0.0, "first_step_ms": 0.01, "decode_ms": 12.5, "transfer_ms": 3.2,
    "transfer_bytes": 81920.0, "transfer_descriptors": 10.0, "transfer_handshake_ms": 25.0,
    "transfer_post_ms": 0.2, "transfer_wire_ms": 1.1, "transfer_pushed": 0.0,
    "proxy": {"prefill_url": "http://p:8000", "decode_url": "http://d:8000",
              "prefill_hop_ms": 9.5, "decode_hop_ms": 16.0, "prefill_retries": 0,
              "path": "pd", "route_reason": "threshold", "prompt_tokens": 40,
              "cached_tokens": 0, "total_ms": 26.1},
    "prefill": {"engine_id": "prefill-0", "role": "prefill", "kv_source": "computed",
                "prompt_ms": 7.0, "first_step_ms": 1.0, "decode_ms": 0.0},
}  # fmt: skip
DECODE_ALONE = {
    "engine_id": "decode-0", "role": "decode", "kv_source": "computed", "prompt_ms": 4.0,
    "first_step_ms": 1.0, "decode_ms": 9.0, "kv_digest": {"0": ["ab", "cd"]},
    "proxy": {"decode_url": "http://d:8000", "decode_hop_ms": 14.0, "path": "decode",
              "route_reason": "short_prompt", "total_ms": 15.0},
}  # fmt: skip
VLLM_THROUGH_PROXY = {  # vLLM's answers carry no figures of their own
    "proxy": {"decode_url": "http://d:8000", "decode_hop_ms": 3.0, "path": "decode",
              "route_reason": "all", "total_ms": 3.5},
}  # fmt: skip


@pytest.mark.parametrize("wire", [PD_ANSWER, DECODE_ALONE, VLLM_THROUGH_PROXY, {"x": [1]}, {}])
def test_recorded_figures_come_back_byte_for_byte(wire: dict[str, Any]) -> None:
    assert json.dumps(Timings.from_wire(wire).to_wire()) == json.dumps(wire)


def test_the_figures_are_typed() -> None:
    t = Timings.from_wire(PD_ANSWER)
    assert t.proxy is not None and t.proxy.prefill_hop_ms == 9.5 and t.proxy.path == "pd"
    assert t.prefill is not None and t.prefill.prompt_ms == 7.0
    assert t.transfer_wire_ms == 1.1 and Timings.from_wire(None) == Timings()


def test_the_proxy_adds_a_new_value() -> None:
    worker = Timings.from_wire({k: v for k, v in DECODE_ALONE.items() if k != "proxy"})
    proxy = ProxyFigures.from_wire(DECODE_ALONE["proxy"])
    answered = worker.with_proxy(proxy)
    assert worker.proxy is None and json.dumps(answered.to_wire()) == json.dumps(DECODE_ALONE)


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        ({"prompt_ms": "7"}, "disagg.prompt_ms: must be a number"),
        ({"transfer_bytes": True}, "disagg.transfer_bytes: must be a number"),
        ({"engine_id": 3}, "disagg.engine_id: must be a string"),
        ({"proxy": [1]}, "disagg.proxy: must be an object"),
        ({"proxy": {"prefill_retries": 1.5}}, "disagg.proxy.prefill_retries: must be an integer"),
        ({"prefill": {"decode_ms": "x"}}, "disagg.prefill.decode_ms: must be a number"),
        ("x", "disagg: must be an object"),
    ],
)
def test_a_key_of_the_wrong_type_is_refused_by_name(wire: Any, says: str) -> None:
    with pytest.raises(ValueError, match=f"^{says}$"):
        Timings.from_wire(wire)
