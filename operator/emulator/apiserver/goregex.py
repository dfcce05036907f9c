"""Go's ``regexp`` syntax check, on RE2 (the engine Go's ``regexp`` implements).

Pure layer. kube-apiserver compiles every schema ``pattern`` (and every constant CEL regex)
with Go's ``regexp.Compile``; Python's ``re`` accepts look-arounds and back-references that
Go refuses, so the check runs on RE2 (``google-re2``, which cel-python already needs) and
words its error as Go's ``regexp/syntax`` does: ``error parsing regexp: <code>: `<expr>```.
"""

from __future__ import annotations

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


def compile_error(pattern: str) -> str | None:
    """None when Go compiles ``pattern``, else Go's error text."""
    if "\\C" in pattern.replace("\\\\", ""):
        return "error parsing regexp: invalid escape sequence: `\\C`"
    try:
        re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        return _go_message(exc)
    return None


def _go_message(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else b""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if text.startswith("trailing \\"):
        return "error parsing regexp: trailing backslash at end of expression: ``"
    words, _, expr = text.partition(": ")
    return f"error parsing regexp: {_GO_CODES.get(words, words)}: `{expr}`"
