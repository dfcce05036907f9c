"""A refused write: what the operator asked and what the API server answered.

A *refusal* is a write the API server will not take as sent, whatever the timing (a 422, a
quota's or RBAC's 403, a webhook's 400); 404 and 409 (gone, exists), 401, 408 and 429 are
not. The controller records refusals and retries them with back-off
(:mod:`disagg_operator.controller.rules.refusals`); status reports them (Degraded,
ApiRefused); both read this module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

TRANSIENT_CLIENT_CODES = frozenset({401, 404, 408, 409, 429})
MAX_MESSAGE = 300  # characters of the API server's message kept per refusal


def is_refusal(code: int) -> bool:
    """Whether an HTTP answer refuses the write itself (see the module docstring)."""
    return 400 <= code < 500 and code not in TRANSIENT_CLIENT_CODES


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def api_message(text: str) -> tuple[str, str]:
    """(reason, message) of an error body: a ``Status`` object's, else the raw text."""
    try:
        body = json.loads(text)
    except ValueError:
        return "", _cut(text)
    if isinstance(body, dict) and body.get("kind") == "Status":
        return str(body.get("reason") or ""), _cut(str(body.get("message") or ""))
    return "", _cut(text)


@dataclass(frozen=True)
class Refusal:
    """One refused write: what was asked (verb, kind, name) and what the API server said."""

    verb: str
    kind: str
    name: str
    code: int
    reason: str
    message: str

    @property
    def target(self) -> str:
        return f"{self.verb} {self.kind}/{self.name}"

    @property
    def answer(self) -> str:
        """The API server's answer: ``HTTP 422 Invalid: <its message>``."""
        reason = f" {self.reason}" if self.reason else ""
        return f"HTTP {self.code}{reason}: {self.message}"


def lines(refusals: Sequence[Refusal]) -> list[str]:
    """One line per distinct answer, naming every write that got it, in first-seen order:
    ``create Pod/a, create Pod/b refused: HTTP 403 Forbidden: exceeded quota ...``."""
    targets: dict[str, list[str]] = {}
    for refusal in refusals:
        targets.setdefault(refusal.answer, []).append(refusal.target)
    return [f"{', '.join(who)} refused: {answer}" for answer, who in targets.items()]
