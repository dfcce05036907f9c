"""What `disagg bench faults` sends over HTTP: completions with random prompts, and decode
requests naming a prefill that never answers.

Randomness is passed in. Prompts are the reference engine's byte tokens: BOS, then ids
below 256, so no request shares a first block with another by design.
"""

from __future__ import annotations

import random
from typing import Any

from disagg_worker.model.model import BOS
from disagg_worker.serve.rules.kv_params import FIELD, KvTransferParams

MAX_TOKENS = 8  # short answers: the benchmark is about the data path, not decode speed
GHOST_ENGINE = "ghost"


def prompt(rng: random.Random, shortest: int, longest: int) -> list[int]:
    """BOS then random byte tokens; the length (BOS included) uniform in the bounds."""
    n = rng.randint(shortest, longest)
    return [BOS, *(rng.randrange(256) for _ in range(n - 1))]


def completion(tokens: list[int]) -> dict[str, Any]:
    """A completion through the proxy: ``MAX_TOKENS`` tokens, EOS ignored, so every request
    does the same work for its prompt length."""
    return {"prompt": tokens, "max_tokens": MAX_TOKENS, "ignore_eos": True}


def ghost_completion(
    tokens: list[int], port: int, i: int, block_size: int, key: bytes | None = None
) -> dict[str, Any]:
    """A decode request as the proxy would send it, but naming a prefill at
    127.0.0.1:``port`` that never answers: as many block ids as the prompt fills, and
    signed with the deployment's ``key`` (a prefill of the deployment that then hung), so
    decode accepts it and goes to the handshake."""
    blocks = -(-len(tokens) // block_size)
    params = KvTransferParams.build(
        do_remote_prefill=True,
        remote_engine_id=GHOST_ENGINE,
        remote_block_ids=list(range(blocks)),
        remote_host="127.0.0.1",
        remote_port=port,
        remote_request_id=f"{GHOST_ENGINE}-{i}",
    )
    if key is not None:
        params = params.sign(key)
    return {**completion(tokens), FIELD: params.to_wire()}
