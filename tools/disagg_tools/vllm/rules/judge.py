"""The P/D judge beyond tokens: per-position top logprobs of two runs compared.

The models the suites run have random weights and repeat one token, so equal
greedy tokens can hide KV that is partly wrong; the logprobs of every generated position
cannot. vLLM's completions API returns them with ``logprobs: N`` (top N per position) and
``return_tokens_as_token_ids: true`` (keys ``"token_id:<id>"``, so two tokens that decode
to the same text never share a key).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

TOP = 5  # logprobs per position compared
# bf16 logprobs of the same computation agree to rounding (measured equal, 0.0, between
# P/D and aggregated vLLM 0.32 on CPU); one changed early prompt token moves them by
# 0.15 or more (docs/vllm.md)
TOLERANCE = 0.02

Tops = list[dict[int, float]]  # per generated position: token id → logprob


def request_fields() -> dict[str, Any]:
    """What a completions request adds to get the judge's logprobs."""
    return {"logprobs": TOP, "return_tokens_as_token_ids": True}


def tops_of(choice: Mapping[str, Any]) -> Tops:
    """A completion choice's top logprobs, keyed by token id."""
    positions = (choice.get("logprobs") or {}).get("top_logprobs") or []
    return [
        {int(str(k).rsplit(":", 1)[1]): float(v) for k, v in (p or {}).items()} for p in positions
    ]


def gap(mine: Sequence[Mapping[int, float]], theirs: Sequence[Mapping[int, float]]) -> float:
    """The largest difference between the two runs' logprobs of a token, over every token
    either run ranks at a position (the union of both top lists); inf when the runs differ
    in length, or one ranks a token the other does not (its logprob there is only known to
    be below that run's lowest listed one: the worst case is unbounded)."""
    if len(mine) != len(theirs) or not mine:
        return math.inf
    worst = 0.0
    for a, b in zip(mine, theirs, strict=True):
        if a.keys() != b.keys():
            return math.inf
        worst = max(worst, *(abs(a[t] - b[t]) for t in a))
    return worst
