"""KvTransferParams: recorded wire objects come back byte for byte, signatures are those
the dict code made, and what cannot be read is refused naming the key."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_worker.serve.pd.kv_transfer_params import LOCAL_PARAMS, PREFILL_PARAMS
from disagg_worker.serve.rules.kv_params import (
    SIGNATURE,
    DecodeBounds,
    KvTransferParams,
    ParamsError,
    hop_of,
    read_remote,
)

# Wire objects as recorded: each one's source.
REFERENCE_ANSWER = {  # the reference prefill's answer (serve.api.remote_params, signed)
    "do_remote_prefill": True,
    "do_remote_decode": False,
    "remote_engine_id": "prefill-0",
    "remote_block_ids": [0, 1, 2],
    "remote_host": "10.0.0.7",
    "remote_port": 5600,
    "remote_request_id": "cmpl-1-abc",
    "tp_size": 1,
    "remote_model": "tiny/seed=0",
    "remote_incarnation": "prefill-0-1a2b3c4d",
    "prompt_digest": "sha256:00ff",
    "first_token": 65,
}
# its signature under b"k" * 32 as the dict code signed it (kv_params.sign at a699118)
REFERENCE_SIGNATURE = "da66ff2778f6e36111f2a1a1b9fa9e07aed931a5f072da2db92aede56837930e"
VLLM_031_ANSWER = {  # vLLM 0.31.0 nixl/pull_scheduler.py, request_finished's return value
    "do_remote_prefill": True,
    "do_remote_decode": False,
    "remote_block_ids": [[1, 2, 3], [7]],  # one list per KV cache group
    "remote_engine_id": "0b5e9a5c-engine",
    "remote_request_id": "cmpl-9f2c-0-4ab1c2d3",
    "remote_host": "10.1.2.3",
    "remote_port": 5600,
    "tp_size": 2,
    "dcp_size": 1,
    "pp_size": 1,
    "remote_num_tokens": 40,
    "remote_blocks_expiry_time": None,
    "transfer_mode": "pull",
}
RECORDED = [
    REFERENCE_ANSWER,
    {**REFERENCE_ANSWER, SIGNATURE: REFERENCE_SIGNATURE},
    VLLM_031_ANSWER,
    # tests/worker/serve/proxy/test_flow.py VLLM_PARAMS (an older vLLM's order)
    {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [3, 4],
     "remote_engine_id": "e1", "remote_host": "10.0.0.1", "remote_port": 5600,
     "remote_request_id": "cmpl-x", "tp_size": 1},
    # the prefill hop's and decode-alone bodies' params before the typed value
    {"do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
     "remote_block_ids": None, "remote_host": None, "remote_port": None},
    {"do_remote_prefill": False, "do_remote_decode": False},
    {"a": 1},  # tests/worker/serve/proxy/test_discovery.py: a handoff the proxy passes on
    {},
]  # fmt: skip


@pytest.mark.parametrize("wire", RECORDED)
def test_recorded_params_come_back_byte_for_byte(wire: dict[str, Any]) -> None:
    params = KvTransferParams.from_wire(wire)
    assert json.dumps(params.to_wire()) == json.dumps(wire)  # keys, order, nulls
    assert KvTransferParams.from_wire(json.loads(json.dumps(params.to_wire()))) == params


def test_the_protocols_bodies_are_those_the_dicts_were() -> None:
    assert json.dumps(PREFILL_PARAMS.to_wire()) == json.dumps(RECORDED[4])
    assert json.dumps(LOCAL_PARAMS.to_wire()) == json.dumps(RECORDED[5])


def test_fields_are_typed_and_unknown_keys_kept_as_sent() -> None:
    params = KvTransferParams.from_wire(VLLM_031_ANSWER)
    assert params.do_remote_prefill is True and params.remote_port == 5600
    assert params.remote_block_ids == ((1, 2, 3), (7,))
    assert dict(params.others)["transfer_mode"] == "pull"
    assert params.remote_signature is None and SIGNATURE not in params.to_wire()


def test_signing_is_the_dict_codes_and_verify_says_why() -> None:
    key = b"k" * 32
    signed = KvTransferParams.from_wire(REFERENCE_ANSWER).sign(key)
    assert signed.remote_signature == REFERENCE_SIGNATURE
    assert list(signed.to_wire())[-1] == SIGNATURE  # appended, as the dict code did
    assert signed.verify(key) is None and signed.verify(None) is None
    unsigned = KvTransferParams.from_wire(REFERENCE_ANSWER)
    assert (unsigned.verify(key) or "").startswith("required:")
    moved = signed.with_values(remote_port=22)
    assert (moved.verify(key) or "").startswith("does not match:")
    assert (signed.verify(b"o" * 32) or "").startswith("does not match:")


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("do_remote_decode", "yes", "must be true or false"),
        ("do_remote_prefill", 1, "must be true or false"),
        ("remote_engine_id", "", "must be a string of 1 to 253 characters"),
        ("remote_block_ids", "3", "must be a list of block ids"),
        ("remote_block_ids", [[1], 2, "x"], "must be a list of integers >= 0"),
        ("remote_block_ids", [[1, -2]], "must be a list of integers >= 0"),
        ("remote_host", "tcp://x", "must be a host name or an IP address"),
        ("remote_port", "5600", "must be an integer from 1 to 65535"),
        ("remote_request_id", 7, "must be a string"),
        ("tp_size", 0, "must be an integer >= 1"),
        ("remote_model", 7, "must be a string"),
        ("first_token", -1, "must be a token id (an integer >= 0)"),
        (SIGNATURE, 5, "must be a string"),
    ],
)
def test_what_cannot_be_read_is_refused_naming_the_key(
    key: str, value: object, problem: str
) -> None:
    with pytest.raises(ParamsError) as info:
        KvTransferParams.from_wire({**REFERENCE_ANSWER, key: value})
    assert (info.value.where, info.value.problem) == (f"kv_transfer_params.{key}", problem)
    assert str(info.value) == f"kv_transfer_params.{key}: {problem}"


@pytest.mark.parametrize("wire", [None, [1], "x", {1: True}])
def test_anything_but_an_object_is_refused(wire: Any) -> None:
    with pytest.raises(ParamsError, match=r"^kv_transfer_params: must be an object$"):
        KvTransferParams.from_wire(wire)


def test_build_checks_and_keeps_the_order_given() -> None:
    built = KvTransferParams.build(remote_port=1, do_remote_prefill=True, extra=[1])
    assert built.to_wire() == {"remote_port": 1, "do_remote_prefill": True, "extra": [1]}
    assert list(built.to_wire()) == ["remote_port", "do_remote_prefill", "extra"]
    with pytest.raises(ParamsError, match="remote_port"):
        KvTransferParams.build(remote_port=0)


def test_the_value_is_frozen_and_its_wire_a_copy() -> None:
    params = KvTransferParams.from_wire(VLLM_031_ANSWER)
    wire = params.to_wire()
    wire["remote_block_ids"][0].append(9)
    wire["transfer_mode"] = "push"
    assert params.to_wire() == VLLM_031_ANSWER
    with pytest.raises(AttributeError):
        params.remote_port = 1  # type: ignore[misc]


def test_a_decode_reads_only_what_it_can_act_on() -> None:
    bounds = DecodeBounds(num_blocks=8, vocab_size=258)
    remote = read_remote(REFERENCE_ANSWER, bounds)
    assert (remote.host, remote.port, remote.block_ids) == ("10.0.0.7", 5600, (0, 1, 2))
    assert remote.params == KvTransferParams.from_wire(REFERENCE_ANSWER)
    assert KvTransferParams.from_wire(REFERENCE_ANSWER).remote(bounds) == remote
    refusals = {
        "remote_block_ids": {**VLLM_031_ANSWER},  # a list per group: not this decode's
        "remote_request_id": {**REFERENCE_ANSWER, "remote_request_id": "a b"},
        "first_token": {**REFERENCE_ANSWER, "first_token": 258},
        "remote_host": {k: v for k, v in REFERENCE_ANSWER.items() if k != "remote_host"},
    }
    for key, wire in refusals.items():
        with pytest.raises(ParamsError) as info:
            read_remote(wire, bounds)
        assert info.value.key == key


def test_the_hop_a_request_asks_for() -> None:
    assert hop_of(RECORDED[4]) == "prefill" and hop_of(REFERENCE_ANSWER) == "decode"
    assert hop_of(RECORDED[5]) == hop_of(None) == hop_of([1]) == "completion"
    assert hop_of({"do_remote_prefill": True, "remote_port": "x"}) == "decode"  # unreadable


def test_every_field_but_the_bookkeeping_has_a_rule() -> None:
    from dataclasses import fields

    from disagg_worker.serve.rules import kv_params

    names = {f.name for f in fields(KvTransferParams)} - {"others", "keys"}
    assert names == set(kv_params._RULES)
