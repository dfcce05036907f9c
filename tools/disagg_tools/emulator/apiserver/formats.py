"""String formats a custom resource's schema can name, checked as kube-apiserver checks them.

Which count: apiextensions-apiserver v0.36.3 ``pkg/apiserver/validation/formats.go``; how
each is checked: kube-openapi ``pkg/validation/strfmt`` at 43fb72c5454a (pinned by v0.36.3).
A supported format this port does not check is refused at registration (:func:`unported`).
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
from collections.abc import Callable
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


def _rx(pattern: str) -> Callable[[str], bool]:
    compiled = re2.compile(pattern, _OPTIONS)
    return lambda s: compiled.search(s) is not None


_SHORT_NAME = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_HOSTNAME = _rx(
    r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}]"
    r"(([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$"
)
_TIME = _rx(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
_TIME_PARTS = re2.compile(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})", _OPTIONS)
_UUID = "(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?%s[0-9a-f]{3}-?%s[0-9a-f]{3}-?[0-9a-f]{12}$"
_BASE64 = _rx(
    r"^(?:[A-Za-z0-9+\/]{4})*(?:[A-Za-z0-9+\/]{2}==|[A-Za-z0-9+\/]{3}=|[A-Za-z0-9+\/]{4})$"
)
_SHORT = _rx(f"^{_SHORT_NAME}$")
_LONG = _rx(f"^{_SHORT_NAME}(\\.{_SHORT_NAME})*$")
_SSN = _rx(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$")
_MAC = _rx(
    r"^(?:[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){5}|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){7}"
    r"|[0-9a-fA-F]{2}(?:[:-][0-9a-fA-F]{2}){19}|[0-9a-fA-F]{4}(?:\.[0-9a-fA-F]{4}){2,9})$"
)


def is_date(s: str) -> bool:
    """``time.Parse("2006-01-02", s)``: a real calendar day, four-digit year."""
    if len(s) != 10 or s[4] != "-" or s[7] != "-":
        return False
    try:
        datetime.date(int(s[:4]), int(s[5:7]), int(s[8:]))
    except ValueError:
        return False
    return s[:4].isdigit() and s[5:7].isdigit() and s[8:].isdigit()


def is_date_time(s: str) -> bool:
    """strfmt ``IsDateTime``: a date, ``t``, a time of at most 23:59:59 with a zone."""
    parts = s.lower().split("t")
    if len(s) < 4 or len(parts) < 2 or not is_date(parts[0]) or not _TIME(parts[1]):
        return False
    match = _TIME_PARTS.search(parts[1])
    assert match is not None
    hours, minutes, seconds = (str(match.group(i)) for i in (1, 2, 3))
    return hours <= "23" and minutes <= "59" and seconds <= "59"


def _parse_ip_sloppy(s: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """k8s.io/utils/net ``ParseIPSloppy``: Go's ``net.ParseIP`` that also takes leading
    zeros in IPv4 octets (as decimals)."""
    try:
        return ipaddress.ip_address(s)
    except ValueError:
        pass
    octets = s.split(".")
    if len(octets) == 4 and all(o.isdigit() and len(o) <= 3 for o in octets):
        try:
            return ipaddress.ip_address(".".join(str(int(o)) for o in octets))
        except ValueError:
            return None
    return None


def _is_cidr(s: str) -> bool:
    address, slash, bits = s.partition("/")
    if not slash or not bits.isdigit() or _parse_ip_sloppy(address) is None:
        return False
    size = 32 if ":" not in address else 128
    return int(bits) <= size


def _is_hostname(s: str) -> bool:
    return _HOSTNAME(s) and len(s) <= 255 and all(len(p) <= 63 for p in s.split("."))


def _is_bson_object_id(s: str) -> bool:
    try:
        return len(s) == 24 and len(binascii.unhexlify(s)) == 12
    except (binascii.Error, ValueError):
        return False


def _is_base64(s: str) -> bool:
    if not _BASE64(s):
        return False
    try:
        base64.b64decode(s, validate=True)
    except binascii.Error:
        return False
    return True


# normalized name (dashes removed) -> check; the strfmt.Default entries this port checks
CHECKS: dict[str, Callable[[str], bool]] = {
    "datetime": is_date_time,
    "date": is_date,
    "uuid": _rx("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"),
    "uuid3": _rx(_UUID % ("3", "[0-9a-f]")),
    "uuid4": _rx(_UUID % ("4", "[89ab]")),
    "uuid5": _rx(_UUID % ("5", "[89ab]")),
    "k8sshortname": lambda s: len(s) <= 63 and _SHORT(s),
    "k8slongname": lambda s: len(s) <= 253 and _LONG(s),
    "byte": _is_base64,
    "password": lambda s: True,
    "ipv4": lambda s: _parse_ip_sloppy(s) is not None and "." in s,
    "ipv6": lambda s: _parse_ip_sloppy(s) is not None and ":" in s,
    "cidr": _is_cidr,
    "mac": _MAC,
    "hostname": _is_hostname,
    "hexcolor": _rx("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"),
    "ssn": lambda s: len(s) == 11 and _SSN(s),
    "bsonobjectid": _is_bson_object_id,
}
# formats.go: what a CRD may name (from 1.0, and the k8s names from 1.34)
SUPPORTED = frozenset(CHECKS) | {
    "uri",
    "email",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "rgbcolor",
    "duration",
}


def normalize(name: str) -> str:
    """strfmt's registry names formats without dashes (``date-time`` is ``datetime``)."""
    return name.replace("-", "")


def effective(schema: dict[str, Any], types: list[str]) -> str:
    """The format the validator sees: ``StripUnsupportedFormatsPostProcessorForVersion``
    keeps int32/int64 on integers, float/double on numbers, a supported string format on
    strings and untyped nodes (int-or-string too), and nothing else."""
    name = str(schema.get("format") or "")
    kind = types[0] if len(types) == 1 else ""
    if not name:
        return ""
    if kind in ("", "string"):
        return name if normalize(name) in SUPPORTED else ""
    if kind == "integer":
        return name if name in ("int32", "int64") else ""
    if kind == "number":
        return name if name in ("float", "double") else ""
    return ""


def unported(name: str) -> bool:
    """A supported string format whose check this port does not carry."""
    return normalize(name) in SUPPORTED and normalize(name) not in CHECKS
