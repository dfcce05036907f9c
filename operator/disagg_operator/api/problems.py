"""What is wrong with a spec: :class:`Problem` (field path and fix, shared with the
worker's own input checks) and :class:`InvalidSpec`.

Shared by validation and the checks of each engine's contract.
"""

from __future__ import annotations

from disagg_contract.problems import Problem

__all__ = ["InvalidSpec", "Problem"]


class InvalidSpec(ValueError):
    """Raised by render when the spec has problems; carries them."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(str(p) for p in self.problems))
