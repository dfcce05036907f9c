"""``kv_transfer_params``, typed: the P/D hand-off vLLM defines (its keys, kept as they are
on the wire) plus this project's, in one frozen value that is built, signed, verified and
read here and nowhere else.

Two readings: :meth:`KvTransferParams.from_wire` checks what every role reads
(the JSON type of each key, keys it does not know passed through in their order, since vLLM
adds some), and with :class:`DecodeBounds` what a decode acts on (the keys it needs, its
cache and vocabulary). Refusals name the key (:class:`ParamsError`).

Signing: a prefill holding the deployment's key signs (``remote_signature`` = HMAC-SHA256
over :data:`SIGNED` in canonical JSON, under a domain prefix); a decode holding it refuses
params that are unsigned or altered before it dials anyone. History: v1, the only version.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from disagg_worker.serve.rules.limits import MAX_NAME_CHARS, REQUEST_ID, is_int

FIELD = "kv_transfer_params"
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
# a DNS name, IPv4, or bare IPv6 (with a %zone): what the transfer agent can dial
_HOST = re.compile(r"[A-Za-z0-9._:%-]+")
# what a decode needs to read a prefill's KV
REQUIRED = ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port")

BlockId = int | tuple[int, ...]  # vLLM with several KV cache groups sends a list per group


class ParamsError(ValueError):
    """A key of ``kv_transfer_params`` that cannot be read: ``key`` ("" for the whole
    object) and what it must be."""

    def __init__(self, key: str, problem: str) -> None:
        self.key, self.problem = key, problem
        self.where = f"{FIELD}.{key}" if key else FIELD
        super().__init__(f"{self.where}: {problem}")


@dataclass(frozen=True)
class DecodeBounds:
    """What a decode can act on: ``num_blocks`` in its cache (remote blocks are copied
    into as many of its own) and its model's ``vocab_size`` (``first_token``)."""

    num_blocks: int
    vocab_size: int


@dataclass(frozen=True)
class KvTransferParams:
    """One ``kv_transfer_params`` object. A field is None when its key is absent or null;
    ``keys`` says which were sent (a listed None is a JSON null) and in what order, and
    ``others`` holds the keys this project does not read, as sent."""

    do_remote_decode: bool | None = None  # a prefill hop: compute, hold the KV for a decode
    do_remote_prefill: bool | None = None  # a decode hop: read the KV from a prefill
    remote_engine_id: str | None = None
    remote_block_ids: tuple[BlockId, ...] | None = None
    remote_host: str | None = None
    remote_port: int | None = None
    remote_request_id: str | None = None  # None: the prefill holds them under its engine id
    tp_size: int | None = None
    remote_model: str | None = None  # which weights made the KV (ours)
    remote_incarnation: str | None = None  # the prefill process, its NIXL agent name (ours)
    prompt_digest: str | None = None  # the prompt the KV was computed for (ours)
    first_token: int | None = None  # the prefill's token; None: decode computes it (ours)
    remote_signature: str | None = None  # ours: :meth:`sign`
    others: tuple[tuple[str, Any], ...] = ()
    keys: tuple[str, ...] = ()

    @classmethod
    def build(cls, **values: Any) -> KvTransferParams:
        """Params with these keys, in this order (None: a JSON null), checked as
        :meth:`from_wire` checks them."""
        return cls.from_wire(values)

    @classmethod
    def from_wire(cls, wire: Any, bounds: DecodeBounds | None = None) -> KvTransferParams:
        """The object a request or an answer carried; :class:`ParamsError` naming the first
        key that is not what it must be. With ``bounds``: also what a decode within them
        needs (:data:`REQUIRED`, blocks it can hold, ids in its vocabulary)."""
        if not isinstance(wire, Mapping) or not all(isinstance(k, str) for k in wire):
            raise ParamsError("", "must be an object")
        if bounds is not None:
            for key in REQUIRED:
                if wire.get(key) is None:
                    raise ParamsError(key, "required with do_remote_prefill")
        known, others = {}, []
        for key, value in wire.items():
            if key not in _RULES:
                others.append((key, copy.deepcopy(value)))
            elif value is not None:
                known[key] = _RULES[key](key, value, bounds)
            else:
                known[key] = None
        return cls(**known, others=tuple(others), keys=tuple(wire))

    def to_wire(self) -> dict[str, Any]:
        """The object as sent: its keys, in their order, with vLLM's names."""
        others = dict(self.others)
        out: dict[str, Any] = {}
        for key in self.keys:
            value = getattr(self, key) if key in _RULES else copy.deepcopy(others[key])
            if key == "remote_block_ids" and value is not None:
                value = [list(b) if isinstance(b, tuple) else b for b in value]
            out[key] = value
        return out

    def with_values(self, **values: Any) -> KvTransferParams:
        """These params with ``values`` set (keys added at the end), checked again."""
        return self.from_wire({**self.to_wire(), **values})

    def signature(self, key: bytes) -> str:
        """The signature of these params under the deployment's key (hex HMAC-SHA256)."""
        wire = self.to_wire()
        covered = {k: wire.get(k) for k in SIGNED}
        blob = json.dumps(covered, sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(key, _DOMAIN + blob, hashlib.sha256).hexdigest()

    def sign(self, key: bytes) -> KvTransferParams:
        """These params signed with the deployment's key."""
        return self.with_values(**{SIGNATURE: self.signature(key)})

    def verify(self, key: bytes | None) -> str | None:
        """Why a decode holding ``key`` must refuse these params, None when it may read
        them (no key: nothing is checked)."""
        if key is None:
            return None
        if self.remote_signature is None:
            return "required: this decode reads KV only from its deployment's prefills"
        if not hmac.compare_digest(self.remote_signature, self.signature(key)):
            return (
                "does not match: these params were not issued (or were changed after being "
                "issued) by a prefill of this deployment"
            )
        return None

    def remote(self, bounds: DecodeBounds) -> Remote:
        """What a decode within ``bounds`` reads of these params (:func:`read_remote`)."""
        return read_remote(self.to_wire(), bounds)


@dataclass(frozen=True)
class Remote:
    """Where a decode reads a prefill's KV: its side channel, the blocks holding the
    prompt, the request id they are held under, and the params they came in."""

    host: str
    port: int
    engine_id: str
    block_ids: tuple[int, ...]
    request_id: str
    params: KvTransferParams
    incarnation: str = ""  # the prefill process (its NIXL agent name); "": not sent
    prompt_digest: str | None = None
    first_token: int | None = None


def hop_of(wire: Any) -> str:
    """Which hop a request's params ask for, as its flags say even when another key cannot
    be read (the label its refusal is counted under): "prefill", "decode" or
    "completion"."""
    if not isinstance(wire, Mapping):
        return "completion"
    if wire.get("do_remote_decode"):
        return "prefill"
    if wire.get("do_remote_prefill"):
        return "decode"
    return "completion"


def read_remote(wire: Any, bounds: DecodeBounds) -> Remote:
    """What a decode within ``bounds`` reads of a prefill's params: :class:`Remote`;
    ParamsError naming the first key it cannot act on."""
    checked = KvTransferParams.from_wire(wire, bounds)
    host, port = checked.remote_host, checked.remote_port
    engine, ids = checked.remote_engine_id, checked.remote_block_ids
    assert host is not None and port is not None and engine is not None and ids is not None
    return Remote(
        host=host,
        port=port,
        engine_id=engine,
        block_ids=tuple(b for b in ids if isinstance(b, int)),  # bounds: flat ids only
        request_id=checked.remote_request_id or engine,
        params=checked,
        incarnation=checked.remote_incarnation or "",
        prompt_digest=checked.prompt_digest,
        first_token=checked.first_token,
    )


def _flag(key: str, value: Any, _: DecodeBounds | None) -> bool:
    if not isinstance(value, bool):
        raise ParamsError(key, "must be true or false")
    return value


def _text(key: str, value: Any, _: DecodeBounds | None) -> str:
    if not isinstance(value, str):
        raise ParamsError(key, "must be a string")
    return value


def _name(key: str, value: Any, _: DecodeBounds | None) -> str:
    """A host or an engine id: a non-empty string no longer than a DNS name."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS:
        raise ParamsError(key, f"must be a string of 1 to {MAX_NAME_CHARS} characters")
    return value


def _host(key: str, value: Any, bounds: DecodeBounds | None) -> str:
    if not _HOST.fullmatch(_name(key, value, bounds)):
        raise ParamsError(key, "must be a host name or an IP address")
    return str(value)


def _port(key: str, value: Any, _: DecodeBounds | None) -> int:
    if not is_int(value) or not 1 <= value <= 65535:
        raise ParamsError(key, "must be an integer from 1 to 65535")
    return value


def _request_id(key: str, value: Any, bounds: DecodeBounds | None) -> str:
    """Any string vLLM names a request with; a decode reads only a bounded safe token (it
    goes into logs and NIXL notifications)."""
    if bounds is None:
        return _text(key, value, bounds)
    if not isinstance(value, str) or not REQUEST_ID.fullmatch(value):
        raise ParamsError(key, "must be 1 to 128 of [A-Za-z0-9._:-]")
    return value


def _tp_size(key: str, value: Any, _: DecodeBounds | None) -> int:
    if not is_int(value) or value < 1:
        raise ParamsError(key, "must be an integer >= 1")
    return value


def _incarnation(key: str, value: Any, _: DecodeBounds | None) -> str:
    # a NIXL agent name: the engine id, "-" and 8 hex digits
    if not isinstance(value, str) or len(value) > MAX_NAME_CHARS + 9:
        raise ParamsError(key, "must be the prefill's agent name")
    return value


def _token(key: str, value: Any, bounds: DecodeBounds | None) -> int:
    if bounds is None:
        if not is_int(value) or value < 0:
            raise ParamsError(key, "must be a token id (an integer >= 0)")
    elif not is_int(value) or not 0 <= value < bounds.vocab_size:
        raise ParamsError(key, f"must be a token id in [0, {bounds.vocab_size})")
    return value


def _block_ids(key: str, value: Any, bounds: DecodeBounds | None) -> tuple[BlockId, ...]:
    """Block ids, or (vLLM with several KV cache groups, never a decode here) a list of
    them per group."""
    if not isinstance(value, list):
        raise ParamsError(key, "must be a list of block ids")
    if bounds is not None and len(value) > bounds.num_blocks:  # before each id: it may be long
        many = f"{len(value)} ids, more than this decode's {bounds.num_blocks} blocks"
        raise ParamsError(key, many)
    if all(is_int(i) and i >= 0 for i in value):
        return tuple(value)
    if bounds is None and all(isinstance(g, list) and _ids(g) for g in value):
        return tuple(tuple(g) for g in value)
    raise ParamsError(key, "must be a list of integers >= 0")


def _ids(group: list[Any]) -> bool:
    return all(is_int(i) and i >= 0 for i in group)


Rule = Callable[[str, Any, DecodeBounds | None], Any]
# How each key this project reads is read (each rule refuses by the key's name).
_RULES: dict[str, Rule] = {
    "do_remote_decode": _flag,
    "do_remote_prefill": _flag,
    "remote_engine_id": _name,
    "remote_block_ids": _block_ids,
    "remote_host": _host,
    "remote_port": _port,
    "remote_request_id": _request_id,
    "tp_size": _tp_size,
    "remote_model": _text,
    "remote_incarnation": _incarnation,
    "prompt_digest": _text,
    "first_token": _token,
    SIGNATURE: _text,
}
