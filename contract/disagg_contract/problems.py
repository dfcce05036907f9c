"""A problem with user input: where (a field path) and what is wrong, with the fix.

The base of the stack: the platforms-file loader here and the operator's spec
validation both report :class:`Problem` lines, rendered as ``field: message``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong: where (a field path) and what to do."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"
