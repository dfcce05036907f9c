"""``--pd-protocol`` names a built-in P/D protocol or an engine's own (MODULE:ATTR);
anything else is refused naming what to write."""

from __future__ import annotations

import argparse

import pytest

from disagg_worker.serve import pd
from disagg_worker.serve.pd.kv_transfer_params import (
    KV_TRANSFER_PARAMS,
    KvTransferParamsProtocol,
)
from disagg_worker.serve.rules.kv_params import KvTransferParams


def test_the_default_is_vllms_kv_transfer_params() -> None:
    assert pd.resolve(pd.DEFAULT) is KV_TRANSFER_PARAMS
    assert isinstance(pd.resolve("disagg_worker.serve.pd.kv_transfer_params:KV_TRANSFER_PARAMS"),
                      KvTransferParamsProtocol)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("sglang", "write one of kv-transfer-params, or MODULE:ATTR"),
        ("no.such.module:X", "cannot load it: No module named 'no'"),
        ("disagg_worker.serve.pd:NOPE", "cannot load it"),
        ("disagg_worker.serve.pd:DEFAULT", "str is not a PdProtocol instance"),
    ],
)
def test_anything_else_is_refused_naming_the_fix(name: str, says: str) -> None:
    with pytest.raises(ValueError, match="--pd-protocol") as info:
        pd.resolve(name)
    assert says in str(info.value)


def test_kv_transfer_params_bodies() -> None:
    body = {"prompt": "x", "max_tokens": 9, "stream": True, "min_tokens": 2}
    first = KV_TRANSFER_PARAMS.prefill(body)
    assert first["max_tokens"] == 1 and first["stream"] is False and "min_tokens" not in first
    assert first["kv_transfer_params"]["do_remote_decode"] is True
    params = {"remote_block_ids": [1]}
    handoff = KV_TRANSFER_PARAMS.handoff({"kv_transfer_params": params})
    assert handoff == KvTransferParams.from_wire(params) and handoff.to_wire() == params
    assert KV_TRANSFER_PARAMS.handoff({"kv_transfer_params": None}) is None
    assert KV_TRANSFER_PARAMS.decode(body, handoff) == {**body, "kv_transfer_params": params}
    assert KV_TRANSFER_PARAMS.local(body)["kv_transfer_params"]["do_remote_prefill"] is False
    assert KV_TRANSFER_PARAMS.release(handoff) == ("/v1/kv/release", {"kv_transfer_params": params})
    with pytest.raises(ValueError, match=r"kv_transfer_params\.remote_port: must be an integer"):
        KV_TRANSFER_PARAMS.handoff({"kv_transfer_params": {"remote_port": "5600"}})


def test_the_flag_parses_into_the_protocol_and_refuses_by_the_parser(
    capsys: pytest.CaptureFixture[str],
) -> None:
    parser = argparse.ArgumentParser(prog="p")
    pd.add_argument(parser)
    assert parser.parse_args([]).pd_protocol is KV_TRANSFER_PARAMS
    with pytest.raises(SystemExit):
        parser.parse_args(["--pd-protocol", "sglang"])
    err = capsys.readouterr().err
    assert "argument --pd-protocol: --pd-protocol 'sglang': write one of" in err
