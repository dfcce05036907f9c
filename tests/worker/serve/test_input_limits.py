"""Hostile input against real processes: the worker and the P/D proxy answer an oversized
body with 413, a body that is not a JSON object or nests too deep with 400 naming
``body``, and a field of the wrong type or range (``kv_transfer_params``' too) with 400
naming the field; no error answer echoes more than a bounded piece of what the client
sent. None of it is a 500, and none of it leaves a traceback in a log."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.worker.serve.conftest import Workers

MIB = 1024 * 1024
LIMIT = 4 * MIB  # the documented body limit (docs/local-run.md)
# An error answer: a message of at most 1,000 characters, a short param, the envelope.
ERROR_BYTES = 1500
LONG = 100_000  # characters in a long client-supplied value


@dataclass
class Servers:
    group: Workers
    agg: str  # a role "both" worker's /v1/completions
    decode: str  # a role "decode" worker's
    proxy: str  # the proxy's, in front of the two

    def __post_init__(self) -> None:
        self._seen: dict[str, int] = {}

    def traceback(self) -> str | None:
        """The first log with a traceback since the last call, and its tail."""
        for child in self.group.children:
            log = child.log_path.read_text()
            if "Traceback" in log[self._seen.get(child.name, 0) :]:
                self._seen = {c.name: len(c.log_path.read_text()) for c in self.group.children}
                return f"{child.name}: {log[-3000:]}"
        return None


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    group = Workers(tmp_path_factory.mktemp("limits"))
    try:
        agg, dec = group.spawn("both"), group.spawn("decode", transfer_deadline_s=1)
        group.ready(agg, dec)
        proxy = group.proxy([agg.url], [dec.url])  # type: ignore[attr-defined]
        path = "/v1/completions"
        yield Servers(group, agg.url + path, dec.url + path, proxy + path)  # type: ignore[attr-defined]
    finally:
        group.stop()


def post_raw(url: str, data: bytes) -> tuple[int, bytes]:
    """POST bytes as JSON; (status, the answer's raw body), errors included."""
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def refused(
    servers: Servers, target: str, data: bytes | dict[str, Any], status: int
) -> dict[str, Any]:
    """POST to ``target``, expect a bounded JSON error with ``status`` and no traceback in
    any log; return the answer's ``error`` object."""
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    got, body = post_raw(getattr(servers, target), raw)
    assert servers.traceback() is None
    assert got == status, body[:500]
    assert len(body) <= ERROR_BYTES, f"{len(body)}-byte error: {body[:300]!r}"
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["code"] == status and error["type"] == "invalid_request_error", error
    return error  # type: ignore[no-any-return]


def _body_of(size: int) -> bytes:
    """A completion body of exactly ``size`` bytes (the prompt pads it)."""
    shell = b'{"prompt": ""}'
    return shell[:-2] + b"a" * (size - len(shell)) + shell[-2:]


TARGETS = ("agg", "proxy")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("size", [LIMIT + 1, 17 * MIB])
def test_a_body_over_the_limit_is_413_naming_it(servers: Servers, target: str, size: int) -> None:
    error = refused(servers, target, _body_of(size), 413)
    assert error["param"] == "body"
    assert error["message"].startswith(f"body: {size} bytes is over the 4 MiB limit"), error
    assert "shorten the prompt" in error["message"]  # what to do


@pytest.mark.parametrize("target", TARGETS)
def test_a_chunked_body_over_the_limit_is_413(servers: Servers, target: str) -> None:
    """No Content-Length to refuse it by: the body is read up to the limit."""
    body = _body_of(LIMIT + MIB)
    chunks = (body[i : i + MIB] for i in range(0, len(body), MIB))
    req = urllib.request.Request(getattr(servers, target), data=chunks)
    req.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(req, timeout=60)
    error = json.loads(info.value.read())["error"]
    assert (info.value.code, error["param"]) == (413, "body"), error
    assert error["message"].startswith("body: over the 4 MiB limit (4194304 bytes); "), error
    assert servers.traceback() is None


def test_a_body_at_the_limit_is_read(servers: Servers) -> None:
    # read and parsed: the engine refuses a prompt this long, naming it
    error = refused(servers, "agg", _body_of(LIMIT), 400)
    assert error["param"] == "max_tokens" and "positions" in error["message"], error


NESTED = [
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="lists-100k"),
    pytest.param(b'{"a":' * 100_000 + b"1" + b"}" * 100_000, id="objects-100k"),
    pytest.param(b'{"prompt": "x", "user": ' + b"[" * 100 + b"]" * 100 + b"}", id="field-100"),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("raw", NESTED)
def test_json_nested_too_deep_is_400_naming_the_body(
    servers: Servers, target: str, raw: bytes
) -> None:
    error = refused(servers, target, raw, 400)
    assert error["param"] == "body"
    assert error["message"].startswith("body: JSON nested deeper than "), error


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("raw", "start"),
    [
        (b"[1, 2]", "body: must be a JSON object"),
        (b'"x"', "body: must be a JSON object"),
        (b'{"prompt": ', "body: not valid JSON"),
        (b"\xff\xfe", "body: not valid JSON"),
    ],
)
def test_a_body_that_is_not_an_object_is_400(
    servers: Servers, target: str, raw: bytes, start: str
) -> None:
    error = refused(servers, target, raw, 400)
    assert error["param"] == "body" and error["message"].startswith(start), error


FIELDS = [
    ({"max_tokens": -1}, "max_tokens"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 10**30}, "max_tokens"),
    ({"max_tokens": True}, "max_tokens"),
    ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ({"max_completion_tokens": 10**30}, "max_completion_tokens"),
    ({"max_completion_tokens": "5"}, "max_completion_tokens"),
    ({"min_tokens": True}, "min_tokens"),
    ({"prompt": [1, -5]}, "prompt"),
    ({"prompt": [10**30]}, "prompt"),
    ({"prompt": [1, True]}, "prompt"),
    ({"prompt": {}}, "prompt"),
    ({"prompt": "\ud800"}, "prompt"),
    ({"prompt": [[1], [2]]}, "prompt"),
    ({"ignore_eos": "yes"}, "ignore_eos"),
    ({"model": []}, "model"),
    ({"seed": "x"}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"user": 5}, "user"),
    ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ({"kv_transfer_params": {"do_remote_decode": "no"}}, "kv_transfer_params.do_remote_decode"),
]


@pytest.mark.parametrize(("fields", "param"), FIELDS, ids=[f[1] for f in FIELDS])
def test_a_field_of_the_wrong_type_or_range_is_400_naming_it(
    servers: Servers, fields: dict[str, Any], param: str
) -> None:
    error = refused(servers, "agg", {"prompt": "x", "max_tokens": 2, **fields}, 400)
    assert error["param"] == param and error["message"].startswith(f"{param}: "), error


@pytest.fixture(scope="module")
def transfer() -> dict[str, Any]:
    """kv_transfer_params a decode accepts, naming a prefill nobody listens as."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": "p0",
        "remote_block_ids": [0],  # the 2-token prompt "x" (BOS, x) fills one block
        "remote_host": "127.0.0.1",
        "remote_port": port,
        "remote_request_id": "cmpl-1-abc",
        "tp_size": 1,
    }


BAD_TRANSFER = [
    ("remote_port", [5600]),
    ("remote_port", "5600"),
    ("remote_port", 0),
    ("remote_port", 65536),
    ("remote_port", True),
    ("remote_port", 5600.0),
    ("remote_port", None),
    ("remote_host", ""),
    ("remote_host", 5),
    ("remote_host", "h" * LONG),
    ("remote_host", None),
    ("remote_host", "*"),
    ("remote_host", "a b"),
    ("remote_engine_id", 5),
    ("remote_engine_id", ""),
    ("remote_engine_id", "e" * LONG),
    ("remote_block_ids", "0"),
    ("remote_block_ids", [-1]),
    ("remote_block_ids", [True]),
    ("remote_block_ids", [0.0]),
    ("remote_block_ids", [[0]]),
    ("remote_block_ids", list(range(100_000))),
    ("remote_block_ids", None),
    ("remote_request_id", "r" * LONG),
    ("remote_request_id", "a b"),
    ("remote_request_id", 5),
    ("tp_size", 0),
    ("tp_size", "1"),
    ("tp_size", True),
    ("remote_model", 5),
    ("remote_model", "x" * LONG),
    ("do_remote_prefill", "yes"),
]


@pytest.mark.parametrize(
    ("key", "value"), BAD_TRANSFER, ids=[f"{k}-{str(v)[:12]}" for k, v in BAD_TRANSFER]
)
def test_each_transfer_param_decode_uses_is_checked_by_name(
    servers: Servers, transfer: dict[str, Any], key: str, value: Any
) -> None:
    params = {**transfer, key: value}
    if value is None:
        del params[key]  # missing
    body = {"prompt": "x", "max_tokens": 2, "kv_transfer_params": params}
    error = refused(servers, "decode", body, 400)
    param = f"kv_transfer_params.{key}"
    assert error["param"] == param and error["message"].startswith(f"{param}: "), error


def test_unknown_transfer_params_pass_through(servers: Servers, transfer: dict[str, Any]) -> None:
    """vLLM adds fields, and so may a newer prefill: decode accepts what it does not know
    and goes on to the transfer, which fails (nobody listens). (``prompt_digest`` is
    checked against the prompt: tests/worker/serve/test_faults.py.)"""
    extra = {"remote_incarnation": "i-1", "future": {"a": [1]}}
    params = {**transfer, **extra}
    got, body = post_raw(
        servers.decode,
        json.dumps({"prompt": "x", "max_tokens": 2, "kv_transfer_params": params}).encode(),
    )
    assert got in (502, 504), body
    assert json.loads(body)["error"]["message"].startswith("KV transfer from prefill p0")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("fields", "status", "param"),
    [({"k" * LONG: 1}, 400, "k" * 64), ({"model": "m" * LONG}, 404, "model")],
    ids=["long-key", "long-model"],
)
def test_long_client_values_are_not_echoed(
    servers: Servers, target: str, fields: dict[str, Any], status: int, param: str
) -> None:
    error = refused(servers, target, {"prompt": "x", **fields}, status)
    if target == "agg":  # the proxy relays the message only
        assert error["param"].startswith(param) and len(error["param"]) <= 128, error
    (value,) = [v if k == "model" else k for k, v in fields.items()]
    assert value[:32] in error["message"] and value[:65] not in error["message"], error
    assert f"({LONG} characters)" in error["message"], error
