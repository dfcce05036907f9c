"""Reference model: a tiny seeded decoder-only transformer over the paged KV cache.

Compute layer (torch, no I/O). Every token, prompt chunk or decode step, attends over K/V
read back from the paged cache, and the first generated token always comes from a
one-token step on the last prompt token, so prefill and decode in two processes equal one
process token for token. Tensor parallelism (:class:`Shard`, one process per rank) gives
the same bits as one rank. The architecture and why each choice: docs/worker.md (The
reference model; Tensor parallelism).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from disagg_contract.presets import PRESETS, ModelSpec, get_preset, tp_problem
from disagg_worker.model.kvcache import PagedKVCache
from disagg_worker.transfer.rules.layout import KVLayout
from disagg_worker.transfer.rules.ranks import rank_heads

__all__ = [
    "BOS",
    "EOS",
    "PRESETS",
    "VOCAB_SIZE",
    "ModelSpec",
    "ReferenceModel",
    "Shard",
    "get_preset",
]

BOS = 256
EOS = 257
VOCAB_SIZE = 258


Gather = Callable[[torch.Tensor], torch.Tensor]
Mirror = Callable[[Sequence[int], int, Sequence[int]], None]


@dataclass(frozen=True)
class Shard:
    """This process's part of a tensor-parallel engine: ``rank`` of ``size``; ``gather``
    concatenates every rank's tensor along the last dimension, in rank order (an
    all-gather); ``mirror`` (rank 0) hands each forward's arguments to the other ranks
    before it runs, so they compute the same step."""

    rank: int = 0
    size: int = 1
    gather: Gather | None = None
    mirror: Mirror | None = None


def kv_layout(
    spec: ModelSpec, block_size: int, num_blocks: int, shard: Shard = Shard()
) -> KVLayout:
    """The float32 layout (a block-major region per KV head) of this rank's cache and its
    transfers."""
    return KVLayout(
        num_layers=spec.num_layers,
        num_kv_heads=len(rank_heads(shard.rank, shard.size, spec.num_kv_heads)),
        head_dim=spec.head_dim,
        block_size=block_size,
        num_blocks=num_blocks,
        dtype="float32",
        block_major=True,
        per_head_regions=True,
    )


def check_shard(spec: ModelSpec, size: int) -> None:
    """Raise ValueError naming DISAGG_TP_SIZE when ``size`` ranks cannot split the model."""
    problem = tp_problem(spec, size)
    if problem is not None:
        raise ValueError(f"DISAGG_TP_SIZE: model {spec.name!r}: {problem}")


def encode(text: str) -> list[int]:
    """Byte-level tokens of ``text``, BOS first."""
    return [BOS, *text.encode("utf-8")]


def decode(tokens: Sequence[int]) -> str:
    """Text of the byte tokens (specials dropped, invalid UTF-8 replaced)."""
    return bytes(t for t in tokens if t < 256).decode("utf-8", errors="replace")


@dataclass
class Generation:
    """Output tokens and where the time went (milliseconds)."""

    tokens: list[int]
    finish_reason: str
    prompt_ms: float = 0.0
    first_step_ms: float = 0.0
    decode_ms: float = 0.0


OnToken = Callable[[int], None]
# asked before each forward pass of a generation: True stops it there (its client left)
Stop = Callable[[], bool]


class Stopped(Exception):
    """A generation stopped at a step boundary because :data:`Stop` said so; the blocks it
    wrote hold a partial result and are the caller's to free."""


@dataclass(frozen=True)
class GenerationRequest:
    """One generation: the prompt, at most ``max_tokens`` (EOS ends it sooner unless
    ``ignore_eos``), EOS masked until ``min_tokens`` are out. ``prompt_cached``: K/V of
    ``prompt[:-1]`` are in the blocks already. ``first_token`` (with ``prompt_cached``): the
    K/V of the whole prompt is in the blocks and this is the token its last position gives
    (a prefill computed both), so the first step is not run again — unless ``min_tokens``
    would mask it (EOS)."""

    prompt: Sequence[int]
    max_tokens: int
    ignore_eos: bool = False
    min_tokens: int = 0
    prompt_cached: bool = False
    first_token: int | None = None


class ReferenceModel:
    """Weights plus the paged cache they write into."""

    def __init__(
        self, spec: ModelSpec, cache: PagedKVCache, seed: int = 0, shard: Shard = Shard()
    ) -> None:
        check_shard(spec, shard.size)
        if shard.size > 1 and shard.gather is None:
            raise ValueError("a tensor-parallel shard needs a gather (the ranks' all-gather)")
        layout = cache.layout
        heads = rank_heads(shard.rank, shard.size, spec.num_kv_heads)
        if (layout.num_layers, layout.num_kv_heads, layout.head_dim) != (
            spec.num_layers,
            len(heads),
            spec.head_dim,
        ):
            raise ValueError(f"cache layout does not fit model {spec.name!r} at {shard}")
        self.spec, self.cache, self.shard = spec, cache, shard
        self.device = cache.tensor.device
        per_q = spec.num_heads // shard.size
        self.q_heads = range(shard.rank * per_q, (shard.rank + 1) * per_q)
        group = spec.num_heads // spec.num_kv_heads  # query heads per KV head
        # the local KV head each local query head attends with
        self.kv_of_q = [heads.index(q // group) for q in self.q_heads]
        self.w = _shard_weights(_init_weights(spec, seed), spec, shard, heads, self.device)
        self.cos, self.sin = _rope_tables(spec, self.device)
        self.steps = 0  # forward passes run: a prompt chunk or a decode step each

    def blocks_needed(self, prompt_len: int, max_tokens: int) -> int:
        """Blocks a request needs: the prompt plus every generated token but the last."""
        return self.cache.layout.blocks_for_tokens(prompt_len + max(max_tokens - 1, 0))

    def check_request(self, prompt: Sequence[int], max_tokens: int) -> None:
        """Raise ValueError naming the field when a request cannot run."""
        if not prompt:
            raise ValueError("prompt: must hold at least one token")
        bad = [t for t in prompt if not 0 <= t < VOCAB_SIZE]
        if bad:
            raise ValueError(f"prompt: token ids must be in [0, {VOCAB_SIZE}), got {bad[:3]}")
        if max_tokens < 1:
            raise ValueError("max_tokens: must be at least 1")
        total = len(prompt) + max_tokens
        if total > self.spec.max_positions:
            raise ValueError(
                f"max_tokens: prompt ({len(prompt)}) + max_tokens ({max_tokens}) exceeds "
                f"the model's {self.spec.max_positions} positions; shorten either"
            )

    @torch.inference_mode()
    def forward(self, tokens: Sequence[int], start: int, table: Sequence[int]) -> torch.Tensor:
        """Run tokens at positions ``start..``, write their K/V, return the last logits."""
        self.steps += 1
        if self.shard.mirror is not None:
            self.shard.mirror(tokens, start, table)
        s, n, hd = self.spec, len(tokens), self.spec.head_dim
        gather = self.shard.gather or (lambda t: t)
        ids = torch.tensor(list(tokens), dtype=torch.long, device=self.device)
        x = self.w["embed"][ids]
        cos, sin = self.cos[start : start + n], self.sin[start : start + n]
        for i in range(s.num_layers):
            p = f"l{i}."
            h = _rms(x, self.w[p + "attn_norm"])
            q = (h @ self.w[p + "wq"].T).view(n, len(self.q_heads), hd)
            k = (h @ self.w[p + "wk"].T).view(n, self.cache.layout.num_kv_heads, hd)
            v = (h @ self.w[p + "wv"].T).view(n, self.cache.layout.num_kv_heads, hd)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            self.cache.write(i, table, start, k, v)
            keys, values = self.cache.read(i, table, start + n)
            attn = _attention(q, keys, values, start, self.kv_of_q)
            x = x + gather(attn.reshape(n, -1)) @ self.w[p + "wo"].T
            h = _rms(x, self.w[p + "mlp_norm"])
            gate = F.silu(h @ self.w[p + "w1"].T) * (h @ self.w[p + "w3"].T)
            x = x + gather(gate) @ self.w[p + "w2"].T
        last = _rms(x[-1:], self.w["final_norm"])
        return (last @ self.w["lm_head"].T)[0]

    @torch.inference_mode()
    def step(self, token: int, pos: int, table: Sequence[int], *, ban_eos: bool = False) -> int:
        """One greedy decode step for ``token`` at position ``pos``; ``ban_eos`` masks EOS
        (vLLM's ``min_tokens`` does the same)."""
        logits = self.forward([token], pos, table)
        if ban_eos:
            logits[EOS] = float("-inf")
        return int(torch.argmax(logits).item())

    def generate(
        self,
        ask: GenerationRequest,
        table: Sequence[int],
        on_token: OnToken | None = None,
        stop: Stop | None = None,
    ) -> Generation:
        """Greedy generation of ``ask`` over the blocks of ``table``; ``on_token``: called
        with each token as it is made (streaming); ``stop``: asked before each forward pass,
        True raises :class:`Stopped` there (a pass once begun runs to its end: with tensor
        parallelism the other ranks are inside it too)."""
        go = _steps(stop)
        prompt = ask.prompt
        t0 = time.perf_counter()
        if not ask.prompt_cached and len(prompt) > 1:
            go()
            self.forward(prompt[:-1], 0, table)
        t1 = time.perf_counter()
        token = ask.first_token
        if not ask.prompt_cached or token is None or (ask.min_tokens and token == EOS):
            go()
            token = self.step(prompt[-1], len(prompt) - 1, table, ban_eos=ask.min_tokens > 0)
        t2 = time.perf_counter()
        out = [token]
        if on_token is not None:
            on_token(token)
        reason = "length"
        while True:
            if token == EOS and not ask.ignore_eos:
                reason = "stop"
                break
            if len(out) >= ask.max_tokens:
                break
            pos = len(prompt) + len(out) - 1
            go()
            token = self.step(token, pos, table, ban_eos=len(out) < ask.min_tokens)
            out.append(token)
            if on_token is not None:
                on_token(token)
        t3 = time.perf_counter()
        ms = 1000.0
        return Generation(out, reason, (t1 - t0) * ms, (t2 - t1) * ms, (t3 - t2) * ms)


def _steps(stop: Stop | None) -> Callable[[], None]:
    """What a generation calls before each forward pass: raises :class:`Stopped` when
    ``stop`` says so."""

    def go() -> None:
        if stop is not None and stop():
            raise Stopped("generation stopped before its next step: its client left")

    return go


def _init_weights(spec: ModelSpec, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    kv_dim = spec.num_kv_heads * spec.head_dim

    def normal(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=gen, dtype=torch.float32) / math.sqrt(cols)

    w: dict[str, torch.Tensor] = {"embed": normal(VOCAB_SIZE, spec.d_model) * 8.0}
    for i in range(spec.num_layers):
        p = f"l{i}."
        w[p + "attn_norm"] = torch.ones(spec.d_model)
        w[p + "wq"] = normal(spec.d_model, spec.d_model)
        w[p + "wk"] = normal(kv_dim, spec.d_model)
        w[p + "wv"] = normal(kv_dim, spec.d_model)
        w[p + "wo"] = normal(spec.d_model, spec.d_model)
        w[p + "mlp_norm"] = torch.ones(spec.d_model)
        w[p + "w1"] = normal(spec.ffn_dim, spec.d_model)
        w[p + "w3"] = normal(spec.ffn_dim, spec.d_model)
        w[p + "w2"] = normal(spec.d_model, spec.ffn_dim)
    w["final_norm"] = torch.ones(spec.d_model)
    w["lm_head"] = normal(VOCAB_SIZE, spec.d_model)
    return w


def _shard_weights(
    w: dict[str, torch.Tensor],
    spec: ModelSpec,
    shard: Shard,
    kv_heads: tuple[int, ...],
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """This rank's rows of the column-parallel projections (its query heads, KV heads and
    MLP units), contiguous; everything else whole."""
    hd, per_q = spec.head_dim, spec.num_heads // shard.size
    per_f = spec.ffn_dim // shard.size
    q_rows = slice(shard.rank * per_q * hd, (shard.rank + 1) * per_q * hd)
    kv_rows = torch.cat([torch.arange(h * hd, (h + 1) * hd) for h in kv_heads])
    f_rows = slice(shard.rank * per_f, (shard.rank + 1) * per_f)
    out = dict(w)
    for i in range(spec.num_layers):
        p = f"l{i}."
        out[p + "wq"] = w[p + "wq"][q_rows]
        out[p + "wk"], out[p + "wv"] = w[p + "wk"][kv_rows], w[p + "wv"][kv_rows]
        out[p + "w1"], out[p + "w3"] = w[p + "w1"][f_rows], w[p + "w3"][f_rows]
    return {k: v.contiguous().to(device) for k, v in out.items()}


def _rope_tables(spec: ModelSpec, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    half = spec.head_dim // 2
    inv = 1.0 / (spec.rope_theta ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.arange(spec.max_positions, dtype=torch.float64)[:, None] * inv[None, :]
    return angles.cos().float().to(device), angles.sin().float().to(device)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((a * c - b * s, a * s + b * c), dim=-1)


def _rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def _attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int, kv_of_q: Sequence[int]
) -> torch.Tensor:
    """Causal GQA, head by head: query ``i`` (position ``start+i``) sees keys at positions
    ``<= start+i``; query head ``j`` attends with KV head ``kv_of_q[j]``.

    A one-token step sees every key; a chunk from position 0 is plain causal (the fused
    kernel); only a chunk after cached tokens needs an explicit mask.
    """
    mask = None
    causal = q.shape[0] > 1 and start == 0
    if q.shape[0] > 1 and start > 0:
        qpos = torch.arange(start, start + q.shape[0], device=q.device)[:, None]
        mask = torch.arange(k.shape[0], device=q.device)[None, :] <= qpos
    qt, kt, vt = (t.transpose(0, 1).unsqueeze(1) for t in (q, k, v))  # [heads, 1, len, dim]
    outs = [
        F.scaled_dot_product_attention(qt[j], kt[kv], vt[kv], attn_mask=mask, is_causal=causal)[0]
        for j, kv in enumerate(kv_of_q)
    ]
    return torch.stack(outs, dim=1)
