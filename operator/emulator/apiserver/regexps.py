"""Schema ``pattern`` regexps, compiled as Go's ``regexp`` compiles them.

kube-openapi matches ``pattern`` with Go's ``regexp`` (RE2 syntax, unanchored
search; validate/rexp.go caches each compiled pattern); Python's ``re`` differs (``$``
before a final newline, Unicode ``\\d``, look-arounds), so patterns run on RE2
(``google-re2``, which cel-python already needs). A pattern RE2 refuses is reported in Go's
words (regexp/syntax): ``error parsing regexp: missing argument to repetition operator: `+```.
"""

from __future__ import annotations

import functools
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
# RE2's error words -> Go's regexp/syntax ErrorCode strings
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
}


def _go_words(error: Exception) -> str:
    text = error.args[0] if error.args else str(error)
    text = text.decode() if isinstance(text, bytes) else str(text)
    code, _, expr = text.partition(": ")
    return f"error parsing regexp: {_GO_CODES.get(code, code)}: `{expr}`"


@functools.lru_cache(maxsize=1024)
def compile_go(pattern: str) -> tuple[Any, str]:
    """(compiled, "") or (None, Go's error message)."""
    try:
        return re2.compile(pattern, _OPTIONS), ""
    except re2.error as e:
        return None, _go_words(e)
