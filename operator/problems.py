"""What is wrong with a spec: :class:`Problem` (field path and fix) and :class:`InvalidSpec`.

Pure layer, shared by validation and the checks of each engine's contract.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where (camelCase path) and what to do."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class InvalidSpec(ValueError):
    """Raised by render when the spec has problems; carries them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))
