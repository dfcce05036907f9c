"""Go's spelling of JSON values, as kube-apiserver prints them in messages.

An apiserver message shows a value with Go's ``%v`` (numbers, booleans), ``%q``
(strings: ``strconv.Quote``) or ``encoding/json.Marshal`` (objects, lists, null); a float
prints as ``strconv.FormatFloat(f, 'g', -1, 64)`` under ``%v`` (``1e+06``) and as ``'f'``
under ``json.Marshal`` (``1000000``). Go 1.25's ``strconv`` and ``encoding/json`` rules,
restated; Python's ``repr`` gives the same shortest digits.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

_SHORT_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t"}
_SHORT_ESCAPES["\v"] = r"\v"
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_HTML = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028"}
_JSON_HTML["\u2029"] = "\\u2029"


def quote(text: str) -> str:
    """``strconv.Quote``: double quotes, Go escapes, printable runes kept as they are."""
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def _digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits of ``abs(value)`` and the exponent of its first digit."""
    _, digits, exponent = Decimal(repr(abs(value))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    return text, len(digits) + exponent - 1


def _exp_form(digits: str, exp: int) -> str:
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _fixed_form(digits: str, exp: int) -> str:
    if exp < 0:
        return "0." + "0" * (-exp - 1) + digits
    if len(digits) <= exp + 1:
        return digits + "0" * (exp + 1 - len(digits))
    return digits[: exp + 1] + "." + digits[exp + 1 :]


def _special(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return None


def float_v(value: float) -> str:
    """``%v`` of a float64: ``'g'`` with the shortest digits, exponent below -4 or from 6."""
    special = _special(value)
    if special is not None:
        return special
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exp = _digits(value)
    text = _exp_form(digits, exp) if exp < -4 or exp >= 6 else _fixed_form(digits, exp)
    return ("-" if value < 0 else "") + text


def _float_json(value: float) -> str:
    special = _special(value)
    if special is not None:
        raise ValueError(f"json: unsupported value: {special}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits, exp = _digits(value)
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        text = _exp_form(digits, exp).replace("e-0", "e-").replace("e+0", "e+")
    else:
        text = _fixed_form(digits, exp)
    return ("-" if value < 0 else "") + text


def _string_json(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[ch])
        elif ch in _JSON_HTML:
            out.append(_JSON_HTML[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def json_marshal(value: Any) -> str:
    """``encoding/json.Marshal`` of a decoded JSON value: sorted keys, HTML-safe strings."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_json(value)
    if isinstance(value, str):
        return _string_json(value)
    if isinstance(value, dict):
        items = (f"{_string_json(k)}:{json_marshal(value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_marshal(v) for v in value) + "]"
    raise TypeError(f"json: unsupported type: {type(value).__name__}")


def value_v(value: Any) -> str:
    """``%v`` of a decoded JSON value (``[a b]``, ``map[k:v]``, ``<nil>``)."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return float_v(value)
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{value_v(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(value_v(v) for v in value) + "]"
    return str(value)
