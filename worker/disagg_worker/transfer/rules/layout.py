"""KV-cache layout: the shape of the paged cache both sides of a transfer must agree on.

A cache is a list of *regions*; each region is ``num_blocks`` equally sized
blocks of ``block_len`` bytes. Two layouts:

- ``block_major`` (the reference model's): one region of shape
  ``[num_blocks, num_layers, 2, block_size, num_kv_heads, head_dim]`` (NHD) — all layers
  of a block are contiguous, so a run of blocks is one descriptor.
- ``per_head_regions`` (block-major, the reference model's): one region per KV head, each of
  shape ``[num_blocks, num_layers, 2, block_size, head_dim]`` — a rank that reads some of a
  peer's heads (tensor parallelism of another size) still moves a run of blocks as one
  descriptor per head (:mod:`ranks`).
- layer-major (vLLM's): ``2 * num_layers`` regions (K and V of each layer), each of shape
  ``[num_blocks, block_size, num_kv_heads, head_dim]`` (NHD) or
  ``[num_blocks, num_kv_heads, block_size, head_dim]`` (HND).
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "uint8": 1,
}


class KVLayout(BaseModel):
    """Geometry of a paged KV cache (per tensor-parallel rank)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    num_layers: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    block_size: int = Field(gt=0, description="tokens per block")
    num_blocks: int = Field(gt=0)
    dtype: Literal["float32", "float16", "bfloat16", "float8_e4m3fn", "uint8"] = "bfloat16"
    layout: Literal["NHD", "HND"] = "NHD"
    block_major: bool = True
    per_head_regions: bool = False

    @model_validator(mode="after")
    def _per_head_needs_block_major(self) -> KVLayout:
        if self.per_head_regions and not (self.block_major and self.layout == "NHD"):
            raise ValueError("per_head_regions needs block_major=True and layout NHD")
        return self

    @property
    def num_regions(self) -> int:
        # a plain property, not a computed field: a dumped layout must validate back
        # under extra="forbid" (it travels as JSON between processes)
        if self.per_head_regions:
            return self.num_kv_heads
        return 1 if self.block_major else 2 * self.num_layers

    @property
    def element_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def bytes_per_token(self) -> int:
        """KV bytes one token occupies across all layers (K and V)."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.element_bytes

    @property
    def block_len(self) -> int:
        """Bytes of one block within one region."""
        per_region_token = self.bytes_per_token // self.num_regions
        return per_region_token * self.block_size

    @property
    def region_len(self) -> int:
        return self.block_len * self.num_blocks

    def region_shape(self) -> tuple[int, ...]:
        """Shape of one region's tensor."""
        if self.per_head_regions:
            return (self.num_blocks, self.num_layers, 2, self.block_size, self.head_dim)
        if self.block_major:
            inner = (self.block_size, self.num_kv_heads, self.head_dim)
            if self.layout == "HND":
                inner = (self.num_kv_heads, self.block_size, self.head_dim)
            return (self.num_blocks, self.num_layers, 2, *inner)
        if self.layout == "HND":
            return (self.num_blocks, self.num_kv_heads, self.block_size, self.head_dim)
        return (self.num_blocks, self.block_size, self.num_kv_heads, self.head_dim)

    def blocks_for_tokens(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def compat_fields(self, *, heads: bool = True) -> dict[str, object]:
        """Fields that must match between peers (num_blocks may differ); without
        ``heads``, those that must match between ranks holding different numbers of KV
        heads (tensor parallelism of other sizes: :mod:`ranks`)."""
        fields: dict[str, object] = {
            "num_layers": self.num_layers,
            "num_kv_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "block_size": self.block_size,
            "dtype": self.dtype,
            "layout": self.layout,
            "block_major": self.block_major,
            "per_head_regions": self.per_head_regions,
        }
        if not heads:
            del fields["num_kv_heads"]
        return fields

    def compat_hash(self, *, heads: bool = True) -> str:
        """Stable hash over :meth:`compat_fields` (sha256, hex, 16 chars)."""
        blob = json.dumps(self.compat_fields(heads=heads), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def mismatches(self, other: KVLayout, *, heads: bool = True) -> list[str]:
        """Human-readable differences, e.g. ``["block_size 16 != 32"]``."""
        mine, theirs = self.compat_fields(heads=heads), other.compat_fields(heads=heads)
        return [f"{k} {mine[k]} != {theirs[k]}" for k in mine if mine[k] != theirs[k]]
