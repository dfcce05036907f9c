"""Where a request's time went, typed: the ``disagg`` object of an answer — what the
worker reports (:class:`Timings`), what the P/D proxy adds (:class:`ProxyFigures`, and
the prefill's own timings) — with the keys and order it has on the wire.

The worker writes it, the proxy builds a new value from the decode's (it never edits
one), and ``disagg up`` and the benchmarks read it with :meth:`Timings.from_wire`. Every
field is optional (None: the key is absent): vLLM answers carry none of the worker's.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

FIELD = "disagg"


@dataclass(frozen=True)
class ProxyFigures:
    """What the proxy measured of one request: the workers, the hops, the route."""

    prefill_url: str | None = None
    decode_url: str | None = None
    prefill_hop_ms: float | None = None
    decode_hop_ms: float | None = None
    prefill_retries: int | None = None
    path: str | None = None  # "pd" or "decode" (decode alone)
    route_reason: str | None = None
    prompt_tokens: int | None = None  # when the routing policy counted the prompt
    cached_tokens: int | None = None
    total_ms: float | None = None

    @classmethod
    def from_wire(cls, wire: Any, where: str = "disagg.proxy") -> ProxyFigures:
        """The ``disagg.proxy`` object; ValueError naming a key of the wrong type."""
        values, _ = _read(cls, wire, where)
        return cls(**values)

    def to_wire(self) -> dict[str, Any]:
        return _write(self)


@dataclass(frozen=True)
class Timings:
    """A worker's figures of one request (the reference worker's: prompt, first step and
    decode; a decode's transfer), and on the proxy's answer its own and the prefill's.
    ``others``: keys this project does not read, as sent."""

    engine_id: str | None = None
    role: str | None = None
    kv_source: str | None = None  # "computed" here or "transferred" from a prefill
    prompt_ms: float | None = None
    first_step_ms: float | None = None
    decode_ms: float | None = None
    transfer_ms: float | None = None  # a decode's READ, wall time
    transfer_bytes: float | None = None
    transfer_descriptors: float | None = None
    transfer_handshake_ms: float | None = None
    transfer_post_ms: float | None = None
    transfer_wire_ms: float | None = None  # NIXL's own time for the READ
    transfer_pushed: float | None = None  # 1: the prefill wrote the blocks
    kv_digest: Mapping[str, list[str]] | None = None  # return_kv_digest
    others: tuple[tuple[str, Any], ...] = ()
    proxy: ProxyFigures | None = None
    prefill: Timings | None = None

    @classmethod
    def from_wire(cls, wire: Any, where: str = FIELD) -> Timings:
        """An answer's ``disagg`` object (None: an empty value); ValueError naming a key of
        the wrong type."""
        if wire is None:
            return cls()
        values, others = _read(cls, wire, where)
        if values.get("proxy") is not None:
            values["proxy"] = ProxyFigures.from_wire(values["proxy"], f"{where}.proxy")
        if values.get("prefill") is not None:
            values["prefill"] = cls.from_wire(values["prefill"], f"{where}.prefill")
        return cls(**values, others=others)

    def to_wire(self) -> dict[str, Any]:
        return _write(self)

    def with_proxy(self, proxy: ProxyFigures, prefill: Timings | None = None) -> Timings:
        """These timings with the proxy's figures (and the prefill's timings) added."""
        return replace(self, proxy=proxy, prefill=prefill)


# a field's type → what its value may be, and what it must be when it is not
_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "str": ((str,), "a string"),
    "float": ((int, float), "a number"),
    "int": ((int,), "an integer"),
}


def _read(cls: type, wire: Any, where: str) -> tuple[dict[str, Any], tuple[tuple[str, Any], ...]]:
    """The known keys of ``wire`` by field, type-checked, and the others as sent."""
    if not isinstance(wire, Mapping):
        raise ValueError(f"{where}: must be an object")
    known = {f.name: f for f in fields(cls) if f.name != "others"}
    values: dict[str, Any] = {}
    others = []
    for key, value in wire.items():
        if key not in known:
            others.append((key, copy.deepcopy(value)))
        elif value is not None:
            values[key] = _checked(str(known[key].type), value, f"{where}.{key}")
    return values, tuple(others)


def _checked(kind: str, value: Any, where: str) -> Any:
    base = kind.split(" | ")[0]
    if base in _TYPES:
        types, what = _TYPES[base]
        if not isinstance(value, types) or isinstance(value, bool):
            raise ValueError(f"{where}: must be {what}")
        return value
    if not isinstance(value, Mapping):  # kv_digest, proxy, prefill
        raise ValueError(f"{where}: must be an object")
    return copy.deepcopy(value)


def _write(value: Any) -> dict[str, Any]:
    """The wire object: each field that is set, in field order, the others after the
    worker's own keys (before the proxy's)."""
    out: dict[str, Any] = {}
    for f in fields(value):
        item = getattr(value, f.name)
        if f.name == "others":
            out.update(copy.deepcopy(dict(item)))
        elif isinstance(item, (Timings, ProxyFigures)):
            out[f.name] = item.to_wire()
        elif item is not None:
            out[f.name] = copy.deepcopy(item) if isinstance(item, Mapping) else item
    return out
