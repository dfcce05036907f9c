"""A benchmark's figures against its targets, as its table shows them: one row per number
with its target and verdict, one line per count.

The fault and flood benchmarks share it; each says how a target it did not measure reads
(``missing``) and whether a number it did not measure gets a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def rows(
    figures: Mapping[str, Any],
    keys: Iterable[str],
    targets: Mapping[str, Any],
    verdicts: Mapping[str, bool | None],
    *,
    missing: str,
    unmeasured_rows: bool,
) -> list[dict[str, str]]:
    """A row per number in ``keys`` order (counts by status or kind are :func:`counts`);
    a key that was not measured gets one only when it has a target or ``unmeasured_rows``."""
    out = []
    for key in keys:
        value = figures.get(key)
        if isinstance(value, dict):
            continue
        if value is None and key not in targets and not unmeasured_rows:
            continue
        out.append(
            {
                "figure": key,
                "value": "-" if value is None else shown(value),
                "target": str(targets.get(key, "")),
                "met": verdict(verdicts[key], missing) if key in targets else "",
            }
        )
    return out


def counts(figures: Mapping[str, Any], keys: Iterable[str], *, empty: str = "") -> list[str]:
    """``key: k v, ...`` for each figure that is a count by status, kind or window;
    ``empty`` stands for a count with no entries."""
    return [
        f"{key}: " + (", ".join(f"{k} {v}" for k, v in value.items()) or empty)
        for key in keys
        if isinstance(value := figures.get(key), dict)
    ]


def shown(value: Any) -> str:
    """A number as the table prints it: floats to at most three decimals."""
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".")
    return str(value)


def verdict(met: bool | None, missing: str) -> str:
    return missing if met is None else ("met" if met else "MISSED")
