"""Go's ``regexp`` on RE2: schema ``pattern`` and CEL regexes compiled as kube-apiserver does.

kube-openapi (pinned by apiextensions-apiserver v0.36.3; ``validate/rexp.go``) and CEL
compile with Go's ``regexp``; Python's ``re`` takes what Go refuses (look-arounds,
back-references), so patterns run on RE2 and refusals read as ``regexp/syntax`` words them.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

# RE2's C++ error words -> Go's regexp/syntax ErrorCode strings
_GO_CODES = {
    "missing ]": "missing closing ]",
    "missing )": "missing closing )",
    "unexpected )": "unexpected )",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid escape sequence": "invalid escape sequence",
    "bad repetition operator": "invalid nested repetition operator",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "invalid character class range": "invalid character class range",
    "invalid character class": "invalid character class",
    "invalid named capture group": "invalid named capture",
    "duplicate capture group name": "duplicate capture group name",
    "invalid UTF-8": "invalid UTF-8",
    "pattern too large - compile failed": "expression too large",
}
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@functools.lru_cache(maxsize=1024)
def compile_go(pattern: str) -> tuple[Any, str]:
    """(the compiled pattern, "") or (None, Go's error text); each pattern compiled once."""
    if "\\C" in pattern.replace("\\\\", ""):  # RE2 takes \C (any byte); Go refuses it
        return None, "error parsing regexp: invalid escape sequence: `\\C`"
    try:
        return re2.compile(pattern, _OPTIONS), ""
    except re2.error as exc:
        return None, _go_message(exc)


def compile_error(pattern: str) -> str | None:
    """None when Go compiles ``pattern``, else Go's error text."""
    return compile_go(pattern)[1] or None


def _go_message(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else b""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if text.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    words, _, expr = text.partition(": ")
    return f"error parsing regexp: {_GO_CODES.get(words, words)}: `{expr}`"
