"""The functions a CRD's CEL rules may call, with their overloads.

kube-apiserver's CEL environment at compatibility version 1.35 (apiserver v0.36.3
``pkg/cel/environment/base.go``): cel-go's standard library and extensions and the
Kubernetes libraries; the checker resolves calls against these, the coster reads the ids.
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_tools.emulator.apiserver import cel_types as t
from disagg_tools.emulator.apiserver.cel_types import Type


@dataclass(frozen=True)
class Overload:
    id: str
    member: bool
    args: tuple[Type, ...]  # receiver first for a member overload
    result: Type


_CMP = ("int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration")
_CROSS = ("int double", "int uint", "uint int", "uint double", "double int", "double uint")
_ORDERED = ("int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration")

# one line a function: ``name: overload_id [recv.](args) -> result``; single upper-case
# letters are type parameters
_TABLE = """
!_: logical_not (bool) -> bool
-_: negate_int64 (int) -> int
-_: negate_double (double) -> double
_&&_: logical_and (bool, bool) -> bool
_||_: logical_or (bool, bool) -> bool
_?_:_: conditional (bool, A, A) -> A
_==_: equals (A, A) -> bool
_!=_: not_equals (A, A) -> bool
@not_strictly_false: not_strictly_false (bool) -> bool
_[_]: index_list (list(A), int) -> A
_[_]: index_map (map(A, B), A) -> B
@in: in_list (A, list(A)) -> bool
@in: in_map (A, map(A, B)) -> bool
_+_: add_int64 (int, int) -> int
_+_: add_uint64 (uint, uint) -> uint
_+_: add_double (double, double) -> double
_+_: add_string (string, string) -> string
_+_: add_bytes (bytes, bytes) -> bytes
_+_: add_list (list(A), list(A)) -> list(A)
_+_: add_timestamp_duration (timestamp, duration) -> timestamp
_+_: add_duration_timestamp (duration, timestamp) -> timestamp
_+_: add_duration_duration (duration, duration) -> duration
_-_: subtract_int64 (int, int) -> int
_-_: subtract_uint64 (uint, uint) -> uint
_-_: subtract_double (double, double) -> double
_-_: subtract_timestamp_timestamp (timestamp, timestamp) -> duration
_-_: subtract_timestamp_duration (timestamp, duration) -> timestamp
_-_: subtract_duration_duration (duration, duration) -> duration
_*_: multiply_int64 (int, int) -> int
_*_: multiply_uint64 (uint, uint) -> uint
_*_: multiply_double (double, double) -> double
_/_: divide_int64 (int, int) -> int
_/_: divide_uint64 (uint, uint) -> uint
_/_: divide_double (double, double) -> double
_%_: modulo_int64 (int, int) -> int
_%_: modulo_uint64 (uint, uint) -> uint
size: size_string (string) -> int
size: size_bytes (bytes) -> int
size: size_list (list(A)) -> int
size: size_map (map(A, B)) -> int
size: string_size string.() -> int
size: bytes_size bytes.() -> int
size: list_size list(A).() -> int
size: map_size map(A, B).() -> int
contains: contains_string string.(string) -> bool
startsWith: starts_with_string string.(string) -> bool
endsWith: ends_with_string string.(string) -> bool
matches: matches (string, string) -> bool
matches: matches_string string.(string) -> bool
int: int64_to_int64 (int) -> int
int: uint64_to_int64 (uint) -> int
int: double_to_int64 (double) -> int
int: string_to_int64 (string) -> int
int: timestamp_to_int64 (timestamp) -> int
uint: uint64_to_uint64 (uint) -> uint
uint: int64_to_uint64 (int) -> uint
uint: double_to_uint64 (double) -> uint
uint: string_to_uint64 (string) -> uint
double: double_to_double (double) -> double
double: int64_to_double (int) -> double
double: uint64_to_double (uint) -> double
double: string_to_double (string) -> double
string: string_to_string (string) -> string
string: int64_to_string (int) -> string
string: uint64_to_string (uint) -> string
string: double_to_string (double) -> string
string: bool_to_string (bool) -> string
string: bytes_to_string (bytes) -> string
string: timestamp_to_string (timestamp) -> string
string: duration_to_string (duration) -> string
string: ip_to_string (IP) -> string
string: cidr_to_string (CIDR) -> string
bytes: bytes_to_bytes (bytes) -> bytes
bytes: string_to_bytes (string) -> bytes
bool: bool_to_bool (bool) -> bool
bool: string_to_bool (string) -> bool
duration: duration_to_duration (duration) -> duration
duration: string_to_duration (string) -> duration
timestamp: timestamp_to_timestamp (timestamp) -> timestamp
timestamp: string_to_timestamp (string) -> timestamp
timestamp: int64_to_timestamp (int) -> timestamp
dyn: to_dyn (A) -> dyn
type: type (A) -> type(A)
charAt: string_char_at_int string.(int) -> string
indexOf: string_index_of_string string.(string) -> int
indexOf: string_index_of_string_int string.(string, int) -> int
indexOf: list_a_index_of_int list(A).(A) -> int
lastIndexOf: string_last_index_of_string string.(string) -> int
lastIndexOf: string_last_index_of_string_int string.(string, int) -> int
lastIndexOf: list_a_last_index_of_int list(A).(A) -> int
lowerAscii: string_lower_ascii string.() -> string
upperAscii: string_upper_ascii string.() -> string
replace: string_replace_string_string string.(string, string) -> string
replace: string_replace_string_string_int string.(string, string, int) -> string
split: string_split_string string.(string) -> list(string)
split: string_split_string_int string.(string, int) -> list(string)
substring: string_substring_int string.(int) -> string
substring: string_substring_int_int string.(int, int) -> string
trim: string_trim string.() -> string
join: list_join list(string).() -> string
join: list_join_string list(string).(string) -> string
strings.quote: strings_quote (string) -> string
format: string_format string.(list(dyn)) -> string
sets.contains: list_sets_contains_list (list(A), list(A)) -> bool
sets.equivalent: list_sets_equivalent_list (list(A), list(A)) -> bool
sets.intersects: list_sets_intersects_list (list(A), list(A)) -> bool
distinct: list_distinct list(A).() -> list(A)
flatten: list_flatten list(list(A)).() -> list(A)
flatten: list_flatten_int list(dyn).(int) -> list(dyn)
lists.range: lists_range (int) -> list(int)
reverse: list_reverse list(A).() -> list(A)
slice: list_slice list(A).(int, int) -> list(A)
sort: list_sort list(A).() -> list(A)
find: string_find_string string.(string) -> string
findAll: string_find_all_string string.(string) -> list(string)
findAll: string_find_all_string_int string.(string, int) -> list(string)
url: string_to_url (string) -> URL
isURL: is_url_string (string) -> bool
getScheme: url_get_scheme URL.() -> string
getHost: url_get_host URL.() -> string
getHostname: url_get_hostname URL.() -> string
getPort: url_get_port URL.() -> string
getEscapedPath: url_get_escaped_path URL.() -> string
getQuery: url_get_query URL.() -> map(string, list(string))
quantity: string_to_quantity (string) -> Quantity
isQuantity: is_quantity_string (string) -> bool
sign: quantity_sign Quantity.() -> int
isGreaterThan: quantity_is_greater_than Quantity.(Quantity) -> bool
isGreaterThan: semver_is_greater_than Semver.(Semver) -> bool
isLessThan: quantity_is_less_than Quantity.(Quantity) -> bool
isLessThan: semver_is_less_than Semver.(Semver) -> bool
compareTo: quantity_compare_to Quantity.(Quantity) -> int
compareTo: semver_compare_to Semver.(Semver) -> int
asApproximateFloat: quantity_get_float Quantity.() -> double
asInteger: quantity_get_int Quantity.() -> int
isInteger: quantity_is_integer Quantity.() -> bool
add: quantity_add Quantity.(Quantity) -> Quantity
add: quantity_add_int Quantity.(int) -> Quantity
sub: quantity_sub Quantity.(Quantity) -> Quantity
sub: quantity_sub_int Quantity.(int) -> Quantity
ip: string_to_ip (string) -> IP
ip: cidr_ip CIDR.() -> IP
family: ip_family IP.() -> int
ip.isCanonical: ip_is_canonical (string) -> bool
isUnspecified: ip_is_unspecified IP.() -> bool
isLoopback: ip_is_loopback IP.() -> bool
isLinkLocalMulticast: ip_is_link_local_multicast IP.() -> bool
isLinkLocalUnicast: ip_is_link_local_unicast IP.() -> bool
isGlobalUnicast: ip_is_global_unicast IP.() -> bool
isIP: is_ip (string) -> bool
cidr: string_to_cidr (string) -> CIDR
containsIP: cidr_contains_ip_string CIDR.(string) -> bool
containsIP: cidr_contains_ip_ip CIDR.(IP) -> bool
containsCIDR: cidr_contains_cidr_string CIDR.(string) -> bool
containsCIDR: cidr_contains_cidr CIDR.(CIDR) -> bool
prefixLength: cidr_prefix_length CIDR.() -> int
masked: cidr_masked CIDR.() -> CIDR
isCIDR: is_cidr (string) -> bool
format.named: format-named (string) -> optional(Format)
validate: format-validate Format.(string) -> optional(list(string))
semver: string_to_semver (string) -> Semver
semver: string_bool_to_semver (string, bool) -> Semver
isSemver: is_semver_string (string) -> bool
isSemver: is_semver_string_bool (string, bool) -> bool
major: semver_major Semver.() -> int
minor: semver_minor Semver.() -> int
patch: semver_patch Semver.() -> int
optional.of: optional_of (A) -> optional(A)
optional.ofNonZeroValue: optional_ofNonZeroValue (A) -> optional(A)
optional.none: optional_none () -> optional(A)
value: optional_value optional(A).() -> A
hasValue: optional_hasValue optional(A).() -> bool
orValue: optional_orValue_value optional(A).(A) -> A
or: optional_or_optional optional(A).(optional(A)) -> optional(A)
"""

_FORMATS = (
    "dns1123Label dns1123Subdomain dns1035Label qualifiedName dns1123LabelPrefix "
    "dns1123SubdomainPrefix dns1035LabelPrefix labelValue uri uuid byte date datetime"
)
_TIME_PARTS = (
    "getFullYear getMonth getDate getDayOfMonth getDayOfWeek getDayOfYear getHours "
    "getMinutes getSeconds getMilliseconds"
)
_K8S_TYPES = {
    "URL": "kubernetes.URL",
    "Quantity": "kubernetes.Quantity",
    "IP": "net.IP",
    "CIDR": "net.CIDR",
    "Semver": "kubernetes.Semver",
    "Format": "kubernetes.NamedFormat",
}


def _type(text: str) -> Type:
    text = text.strip()
    if len(text) == 1 and text.isupper():
        return t.param(text)
    if text in _K8S_TYPES:
        return Type("object", name=_K8S_TYPES[text])
    if "(" in text:
        head, inner = text[:-1].split("(", 1)
        params = [_type(p) for p in _split(inner)]
        return {
            "list": lambda: t.list_of(params[0]),
            "map": lambda: t.map_of(params[0], params[1]),
            "optional": lambda: t.optional_of(params[0]),
            "type": lambda: t.type_of(params[0]),
        }[head]()
    return {
        "bool": t.BOOL,
        "int": t.INT,
        "uint": t.UINT,
        "double": t.DOUBLE,
        "string": t.STRING,
        "bytes": t.BYTES,
        "dyn": t.DYN,
        "null": t.NULL,
        "duration": t.DURATION,
        "timestamp": t.TIMESTAMP,
    }[text]


def _split(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    tail = text[start:].strip()
    return [p for p in [*parts, tail] if p.strip()]


def _overload(text: str) -> Overload:
    head, result = text.rsplit("->", 1)
    oid, sig = head.strip().split(" ", 1)
    sig = sig.strip()
    member = not sig.startswith("(")
    if member:
        recv, args = sig.split(".(", 1)
        arg_types = [_type(recv)] + [_type(a) for a in _split(args[:-1])]
    else:
        arg_types = [_type(a) for a in _split(sig[1:-1])]
    return Overload(oid, member, tuple(arg_types), _type(result))


def _library() -> dict[str, list[Overload]]:
    lib: dict[str, list[Overload]] = {}
    for line in _TABLE.strip().splitlines():
        name, overload = line.split(": ", 1)
        lib.setdefault(name, []).append(_overload(overload))
    for op, oid in (
        ("_<_", "less"),
        ("_<=_", "less_equals"),
        ("_>_", "greater"),
        ("_>=_", "greater_equals"),
    ):
        same = [Overload(f"{oid}_{k}", False, (_type(k), _type(k)), t.BOOL) for k in _CMP]
        cross = [
            Overload(f"{oid}_{a}_{b}", False, (_type(a), _type(b)), t.BOOL)
            for a, b in (pair.split() for pair in _CROSS)
        ]
        lib[op] = same + cross
    for name in ("isSorted", "sum", "min", "max"):
        lib[name] = [
            Overload(
                f"list_{k}_{name}",
                True,
                (t.list_of(_type(k)),),
                t.BOOL if name == "isSorted" else _type(k),
            )
            for k in _ORDERED
            if name == "isSorted" or k not in ("string", "bytes", "bool") or name != "sum"
        ]
    for part in _TIME_PARTS.split():
        lib[part] = [
            Overload(f"timestamp_{part}", True, (t.TIMESTAMP,), t.INT),
            Overload(f"timestamp_{part}_with_tz", True, (t.TIMESTAMP, t.STRING), t.INT),
            Overload(f"duration_{part}", True, (t.DURATION,), t.INT),
        ]
    for fmt in _FORMATS.split():
        lib[f"format.{fmt}"] = [Overload(f"format.{fmt}", False, (), _type("Format"))]
    return lib


LIBRARY = _library()

TYPE_IDENTS = {
    "bool": t.BOOL,
    "int": t.INT,
    "uint": t.UINT,
    "double": t.DOUBLE,
    "string": t.STRING,
    "bytes": t.BYTES,
    "null_type": t.NULL,
    "dyn": t.DYN,
    "duration": t.DURATION,
    "timestamp": t.TIMESTAMP,
}
"""Identifiers that name a type: ``type(self) == string``."""
