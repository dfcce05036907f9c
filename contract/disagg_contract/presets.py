"""Reference model presets: the model shapes `spec.model` may name for the reference model.

No torch, so the operator can check a manifest's model name at admission
without importing the model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """Shape of a reference model preset."""

    name: str
    num_layers: int
    d_model: int
    num_heads: int
    num_kv_heads: int
    ffn_dim: int
    max_positions: int
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


def check_tp(tp: int, kv_heads: int, num_heads: int | None = None) -> str | None:
    """Why ``tp`` ranks cannot split a model with ``kv_heads`` KV heads (and ``num_heads``
    query heads), or None: the heads must divide evenly (or be replicated evenly)."""
    if tp < 1:
        return f"tensor-parallel size {tp} must be at least 1"
    if num_heads is not None and num_heads % tp:
        return f"{num_heads} attention heads do not split over {tp} ranks"
    if tp <= kv_heads and kv_heads % tp:
        return f"{kv_heads} KV heads do not split over {tp} ranks"
    if tp > kv_heads and tp % kv_heads:
        return f"{tp} ranks do not replicate {kv_heads} KV heads evenly"
    return None


PRESETS: dict[str, ModelSpec] = {
    "tiny": ModelSpec("tiny", 4, 256, 8, 2, 768, 4096),
    "small": ModelSpec("small", 8, 512, 8, 2, 1536, 4096),
}


def get_preset(name: str) -> ModelSpec:
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(
            f"DISAGG_MODEL: unknown reference model {name!r}; presets: {', '.join(PRESETS)}"
        ) from None


def tp_problem(spec: ModelSpec, size: int) -> str | None:
    """Why ``size`` tensor-parallel ranks cannot split ``spec`` (its query and KV heads, its
    MLP units), or None."""
    problem = check_tp(size, spec.num_kv_heads, spec.num_heads)
    if problem is None and spec.ffn_dim % size:
        problem = f"{spec.ffn_dim} MLP units do not split over {size} ranks"
    return problem
