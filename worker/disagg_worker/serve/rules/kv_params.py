"""Decode's reading of a prefill's ``kv_transfer_params``: the fields it uses, each checked,
a 400 naming the field otherwise (the rest of the request contract: :mod:`serve.openai`).

Signed params: a prefill that holds the deployment's handshake key signs the params it
returns (``remote_signature`` = HMAC-SHA256 of the key over the :data:`SIGNED` fields, in
canonical JSON), and a decode holding the key refuses params whose signature is missing or
wrong with a 400, before it opens any connection: without it, a client could make decode
dial any host and port it names. Workers without a key (tests, a local worker) neither
sign nor check.

"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any

from disagg_worker.serve.rules.limits import MAX_NAME_CHARS
from disagg_worker.serve.rules.openai import REQUEST_ID, OpenAIError, is_int

# a DNS name, IPv4, or bare IPv6 (with a %zone): what the transfer agent can dial
_HOST = re.compile(r"[A-Za-z0-9._:%-]+")
SIGNATURE = "remote_signature"
# What a signature covers: everything a decode acts on.
SIGNED = (
    "remote_engine_id",
    "remote_block_ids",
    "remote_host",
    "remote_port",
    "remote_request_id",
    "remote_incarnation",
    "remote_model",
    "tp_size",
    "prompt_digest",
    "first_token",
)
_DOMAIN = b"disagg kv_transfer_params v1\n"


def sign(params: dict[str, Any], key: bytes) -> str:
    """The signature of ``params`` under the deployment's key (hex HMAC-SHA256)."""
    covered = {k: params.get(k) for k in SIGNED}
    blob = json.dumps(covered, sort_keys=True, separators=(",", ":")).encode()
    return hmac.new(key, _DOMAIN + blob, hashlib.sha256).hexdigest()


def check_signature(params: dict[str, Any], key: bytes | None) -> None:
    """400 unless ``params`` carry this deployment's signature (no key: nothing checked)."""
    if key is None:
        return
    given = params.get(SIGNATURE)
    if not isinstance(given, str):
        raise _transfer_error(
            SIGNATURE, "required: this decode reads KV only from its deployment's prefills"
        )
    if not hmac.compare_digest(given, sign(params, key)):
        raise _transfer_error(
            SIGNATURE,
            "does not match: these params were not issued (or were changed after being "
            "issued) by a prefill of this deployment",
        )


@dataclass(frozen=True)
class TransferParams:
    """The ``kv_transfer_params`` a decode reads, checked: where the prefill's side channel
    listens, which of its blocks hold the prompt, the request id they are held under.
    ``raw`` is the whole object, with the keys no check reads (vLLM adds fields, and so
    does this project): they pass through untouched."""

    host: str
    port: int
    engine_id: str
    block_ids: tuple[int, ...]
    request_id: str
    raw: dict[str, Any]
    incarnation: str = ""  # the prefill process (its NIXL agent name); "": not sent
    prompt_digest: str | None = None  # the digest of the prompt the KV was computed for
    first_token: int | None = None  # the token the prefill computed; None: decode computes it


def transfer_params(params: dict[str, Any], num_blocks: int, vocab_size: int) -> TransferParams:
    """Decode's view of a prefill's ``kv_transfer_params``: every field it uses checked,
    400 naming it (``kv_transfer_params.remote_port``). ``num_blocks`` is decode's cache:
    the remote blocks are copied into as many of its own, so no more can be asked for;
    ``first_token`` must be one of the model's ``vocab_size`` token ids."""
    for key in ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port"):
        if params.get(key) is None:
            raise _transfer_error(key, "required with do_remote_prefill")
    port = params["remote_port"]
    if not is_int(port) or not 1 <= port <= 65535:
        raise _transfer_error("remote_port", "must be an integer from 1 to 65535")
    engine_id = _name(params, "remote_engine_id")
    request_id = params.get("remote_request_id")
    if request_id is None:
        request_id = engine_id  # prefills that send none hold blocks under the engine id
    elif not isinstance(request_id, str) or not REQUEST_ID.fullmatch(request_id):
        raise _transfer_error("remote_request_id", "must be 1 to 128 of [A-Za-z0-9._:-]")
    tp_size = params.get("tp_size")
    if tp_size is not None and (not is_int(tp_size) or tp_size < 1):
        raise _transfer_error("tp_size", "must be an integer >= 1")
    if not isinstance(params.get("remote_model", ""), str):
        raise _transfer_error("remote_model", "must be a string")
    ids = _block_ids(params["remote_block_ids"], num_blocks)
    incarnation = params.get("remote_incarnation") or ""
    # a NIXL agent name: the engine id, "-" and 8 hex digits
    if not isinstance(incarnation, str) or len(incarnation) > MAX_NAME_CHARS + 9:
        raise _transfer_error("remote_incarnation", "must be the prefill's agent name")
    digest = params.get("prompt_digest")
    if digest is not None and not isinstance(digest, str):
        raise _transfer_error("prompt_digest", "must be a string")
    first = params.get("first_token")
    if first is not None and (not is_int(first) or not 0 <= first < vocab_size):
        raise _transfer_error("first_token", f"must be a token id in [0, {vocab_size})")
    return TransferParams(
        _host(params), port, engine_id, ids, request_id, params, incarnation, digest, first
    )


def _transfer_error(key: str, problem: str) -> OpenAIError:
    where = f"kv_transfer_params.{key}"
    return OpenAIError(
        400, f"{where}: {problem}; pass the kv_transfer_params the prefill worker returned", where
    )


def _name(params: dict[str, Any], key: str) -> str:
    """A host or an engine id: a non-empty string no longer than a DNS name."""
    value = params[key]
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        raise _transfer_error(key, f"must be a string of 1 to {MAX_NAME_CHARS} characters")
    return value


def _host(params: dict[str, Any]) -> str:
    host = _name(params, "remote_host")
    if not _HOST.fullmatch(host):
        raise _transfer_error("remote_host", "must be a host name or an IP address")
    return host


def _block_ids(ids: Any, num_blocks: int) -> tuple[int, ...]:
    if not isinstance(ids, list):
        raise _transfer_error("remote_block_ids", "must be a list of block ids")
    if len(ids) > num_blocks:  # before looking at each id: the list may be long
        raise _transfer_error(
            "remote_block_ids", f"{len(ids)} ids, more than this decode's {num_blocks} blocks"
        )
    if not all(is_int(i) and i >= 0 for i in ids):
        raise _transfer_error("remote_block_ids", "must be a list of integers >= 0")
    return tuple(ids)
