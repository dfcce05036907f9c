"""Reference model presets: the model shapes `spec.model` may name for the reference model.

No torch, so the operator can check a manifest's model name at admission
without importing the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_worker.transfer.rules.ranks import check_tp


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
