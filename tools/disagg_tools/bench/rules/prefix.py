"""`disagg bench prefix`'s pure part: the multi-turn chat trace, and its figures (how far
each router's predicted cached tokens were from what the engine read from its prefix cache,
in blocks; TTFT median and p90 per router).

A router's prediction is what it said in ``X-Disagg-Cached-Tokens``; the truth
is the chosen engine's ``vllm:prefix_cache_hits`` grown over that one request (requests go
one at a time). A round-robin router predicts nothing: it gets TTFT figures only.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from disagg_tools.bench.rules.spread import percentile

WORDS = ("river", "stone", "light", "paper", "window", "garden", "signal", "copper", "winter",
         "orange", "market", "silver", "engine", "basket", "forest", "pocket", "mirror",
         "ladder", "candle", "rocket")  # fmt: skip


def user_message(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def conversations(seed: int, count: int, words: int) -> list[list[dict[str, str]]]:
    """``count`` conversations, each opened by a user message of ``words`` words (turns
    are added as they are answered: :func:`next_turn`)."""
    rng = random.Random(seed)
    return [[{"role": "user", "content": user_message(rng, words)}] for _ in range(count)]


def next_turn(
    messages: list[dict[str, str]], answer: str, rng: random.Random, words: int
) -> list[dict[str, str]]:
    """The conversation extended by the assistant's answer and a new user message."""
    return [*messages, {"role": "assistant", "content": answer},
            {"role": "user", "content": user_message(rng, words)}]  # fmt: skip


@dataclass(frozen=True)
class Row:
    """One request: the router (``side``), its turn, the engine that served it, what the
    router predicted it held (tokens; None: no prediction) and what it read from cache."""

    side: str
    turn: int
    engine: str
    prompt_tokens: int
    predicted: int | None
    hits: int
    ttft_ms: float


def error_blocks(row: Row, block: int) -> float | None:
    """Predicted minus read, in blocks (positive: the router expected more than was held)."""
    return None if row.predicted is None else (row.predicted - row.hits) / block


def side_figures(rows: Sequence[Row], block: int) -> dict[str, Any]:
    """One router's figures: TTFT median/p90 and, where it predicts, its errors."""
    ttft = [r.ttft_ms for r in rows]
    out: dict[str, Any] = {
        "requests": len(rows),
        "ttft_p50_ms": round(percentile(ttft, 50), 1),
        "ttft_p90_ms": round(percentile(ttft, 90), 1),
        "hit_tokens": sum(r.hits for r in rows),
        "prompt_tokens": sum(r.prompt_tokens for r in rows),
    }
    errors = [e for e in (error_blocks(r, block) for r in rows) if e is not None]
    if errors:
        out |= {
            "within_one_block": sum(abs(e) <= 1 for e in errors),
            "max_abs_error_blocks": max(abs(e) for e in errors),
            "mean_abs_error_blocks": round(sum(abs(e) for e in errors) / len(errors), 2),
            "over_predicted": sum(e > 1 for e in errors),
            "under_predicted": sum(e < -1 for e in errors),
        }
    return out


def figures(rows: Sequence[Row], block: int) -> dict[str, dict[str, Any]]:
    sides = sorted({r.side for r in rows})
    return {s: side_figures([r for r in rows if r.side == s], block) for s in sides}


def table(result: dict[str, dict[str, Any]]) -> str:
    head = ("router", "reqs", "TTFT p50", "TTFT p90", "hit/prompt tok", "within 1 blk",
            "max |err|", "mean |err|")  # fmt: skip
    lines = [" | ".join(head)]
    for side, f in result.items():
        n = f["requests"]
        within = f"{f['within_one_block']}/{n}" if "within_one_block" in f else "-"
        lines.append(" | ".join([
            side, str(n), f"{f['ttft_p50_ms']} ms", f"{f['ttft_p90_ms']} ms",
            f"{f['hit_tokens']}/{f['prompt_tokens']}", within,
            str(f.get("max_abs_error_blocks", "-")), str(f.get("mean_abs_error_blocks", "-")),
        ]))  # fmt: skip
    return "\n".join(lines)
