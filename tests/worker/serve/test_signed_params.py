"""Decode dials only prefills of its deployment: a prefill holding the deployment's key
signs the kv_transfer_params it returns, and a decode holding it refuses unsigned, foreign
or altered params with a 400 before it opens any connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from disagg_worker.serve.api import check_signature
from disagg_worker.serve.rules.kv_params import SIGNATURE, KvTransferParams
from disagg_worker.serve.rules.openai import OpenAIError
from tests.worker.serve.conftest import Workers, post
from tests.worker.serve.test_faults import SilentPeer, _prompt

KEY, OTHER = b"k" * 32, b"o" * 32


def _params(**changes: Any) -> KvTransferParams:
    params = KvTransferParams.build(
        do_remote_prefill=True,
        remote_engine_id="prefill-0",
        remote_block_ids=[0, 1],
        remote_host="10.0.0.7",
        remote_port=5600,
        remote_request_id="r-1",
    )
    return params.sign(KEY).with_values(**changes)


def test_signed_params_pass_and_anything_else_is_refused_naming_the_field() -> None:
    check_signature(_params(), KEY)
    check_signature(_params(remote_port=1), None)  # no key: nothing is checked
    refused = {
        "unsigned": _params(**{SIGNATURE: None}),
        "another host": _params(remote_host="203.0.113.9"),
        "another port": _params(remote_port=22),
        "more blocks": _params(remote_block_ids=[0, 1, 2]),
        "another key": _params().sign(OTHER),
    }
    for why, params in refused.items():
        with pytest.raises(OpenAIError) as info:
            check_signature(params, KEY)
        assert info.value.status == 400, why
        assert f"kv_transfer_params.{SIGNATURE}" in info.value.message, why


@pytest.fixture
def silent_peer() -> Any:
    peer = SilentPeer()
    yield peer
    peer.close()


def test_a_keyed_pair_transfers_and_decode_refuses_forged_params_without_dialing(
    workers: Workers, tmp_path: Path, silent_peer: SilentPeer
) -> None:
    key = tmp_path / "hmac"
    key.write_text("s" * 48)
    pre = workers.worker("prefill", hmac_secret_path=key)
    dec = workers.worker("decode", hmac_secret_path=key)
    proxy = workers.proxy([pre.url], [dec.url]) + "/v1/completions"  # type: ignore[attr-defined]
    body = {"prompt": _prompt(40, 3), "max_tokens": 2}
    status, out = post(proxy, body)
    assert status == 200, out  # the signed pair moves KV as before
    status, first = post(
        pre.url + "/v1/completions",
        {  # type: ignore[attr-defined]
            **body,
            "max_tokens": 1,
            "kv_transfer_params": {"do_remote_decode": True},
        },
    )
    params = first["kv_transfer_params"]
    assert status == 200 and SIGNATURE in params
    forged = {**params, "remote_port": silent_peer.port}  # a client's own host and port
    status, out = post(dec.url + "/v1/completions", {**body, "kv_transfer_params": forged})  # type: ignore[attr-defined]
    assert status == 400 and SIGNATURE in out["error"]["message"], out
    assert silent_peer.accepted == []  # refused before any connection
