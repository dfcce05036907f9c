"""Bounds on what a client may send the worker or the P/D proxy, and on how much of it an
error answer may echo back. docs/local-run.md lists them; the refusals that use them are
in :mod:`.openai` and :mod:`.kv_params`. The proxy imports it too.
"""

from __future__ import annotations

import re
import reprlib
from typing import Any, TypeGuard

MIB = 1024 * 1024

# A request body's limit, worker and proxy alike (413 above it). The largest honest body
# is a long prompt: 128k tokens as token ids is about 1 MiB of JSON ("12345, " a token),
# as text about 0.5 MiB, so 4 MiB holds it four times over. The reference worker's model
# takes 4,096 positions (some 20 KiB of ids); the proxy also fronts vLLM, whose contexts
# are longer. A bound keeps one request from holding tens of MiB of memory while it parses.
MAX_BODY_BYTES = 4 * MIB

# How deep a body may nest lists and objects (400 deeper). The worker's deepest field is
# messages[i].content (3); the proxy relays vLLM bodies whose tool and response_format
# JSON schemas nest further. Far below Python's recursion limit, so parsing a body and
# writing it again for a hop can never hit it.
MAX_JSON_DEPTH = 64

# The reference worker's bound on max_tokens / max_completion_tokens before its engine
# checks them with the prompt against the model's positions (4,096 in every preset): far
# above any preset, and a number small enough to quote in that check's message.
MAX_TOKENS = 1 << 20

# A host name (RFC 1035: 253 characters; an IPv6 literal is 45) and an engine id (a pod
# name, a DNS name too) in kv_transfer_params.
MAX_NAME_CHARS = 253

# A request id a client may set (and decode's kv_transfer_params must carry): safe in logs,
# NIXL notifications and headers.
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# An error answer stays small whatever the client sent: messages and params are cut in
# one place each side (OpenAIError; the proxy's answers), and a client's value is quoted by
# a short prefix, never whole (a 100 KB request id must not come back as 100 KB).
MESSAGE_CHARS = 1000  # an error message, whatever it quotes
PARAM_CHARS = 128  # an error's ``param``: a field path, or a client's unknown key
SHOWN_CHARS = 64  # a client-supplied value quoted in a message

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = SHOWN_CHARS


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` cut to at most ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    cut = f"... ({len(text)} characters)"
    if limit <= len(cut):
        return text[:limit]
    return text[: limit - len(cut)] + cut


def shown(value: Any, limit: int = SHOWN_CHARS) -> str:
    """A client-supplied value as a message quotes it: its repr, at most about ``limit``
    characters (a long string is cut and its length given; a big list is elided)."""
    if isinstance(value, str):
        return repr(bounded(value, limit))
    return bounded(_REPR.repr(value), limit)


def is_int(value: Any) -> TypeGuard[int]:
    """An integer, and not a bool (which Python counts as one)."""
    return isinstance(value, int) and not isinstance(value, bool)


def nested_deeper(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests lists and objects more than ``limit`` deep (a
    scalar is depth 0, ``{}`` 1). Iterative: the value may be deeper than the stack."""
    todo = [(value, 1)] if isinstance(value, (list, dict)) else []
    while todo:
        item, depth = todo.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        todo.extend((c, depth + 1) for c in children if isinstance(c, (list, dict)))
    return False
