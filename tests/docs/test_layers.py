"""The layer pictures in docs/architecture.md and docs/operator.md are the
import-linter contracts' (scripts/layers.py generates them from pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.scripts import load

ROOT = Path(__file__).resolve().parents[2]
layers = load("layers.py")


@pytest.mark.parametrize("doc", layers.DOCS)
def test_the_layer_picture_is_the_contracts(doc: str) -> None:
    text = (ROOT / doc).read_text()
    assert layers.picture() in text, f"{doc}: the layers drifted; run: {layers.COMMAND}"


def test_every_layer_of_the_contracts_is_described() -> None:
    stacks = layers.layers().values()
    named = {part.strip() for stack in stacks for layer in stack for part in layer.split("|")}
    assert named == set(layers.WHAT)
    assert {"Operator subsystems are layered", "Worker subsystems are layered"} <= set(
        layers.layers()
    )
