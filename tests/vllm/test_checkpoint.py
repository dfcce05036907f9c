"""`disagg model tiny-llama DIR`: the same bytes every run; a Llama with a chat template."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_two_runs_write_the_same_checkpoint(tmp_path: Path) -> None:
    for name in ("a", "b"):
        cmd = [
            sys.executable,
            "-m",
            "disagg_operator.cli",
            "model",
            "tiny-llama",
            str(tmp_path / name),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True)
        info = json.loads(out.stdout.strip().splitlines()[-1])
        assert info["num_key_value_heads"] == 2 and info["parameters"] > 1_000_000
    first, second = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(first)
    assert first == second


def test_transformers_reads_it_as_a_llama_with_a_chat_template(tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    from disagg_tools.vllm import checkpoint

    checkpoint.write(tmp_path)
    # readable by any pod user (the images run as uid 65532): safetensors alone writes 0600
    assert {f.name: f.stat().st_mode & 0o777 for f in tmp_path.iterdir()} == {
        f.name: 0o644 for f in tmp_path.iterdir()
    }
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == "llama" and config.num_key_value_heads == 2
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    ids = tokenizer("The quick brown fox")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and max(ids) < checkpoint.VOCAB_SIZE
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert chat == "user: hi\nassistant:"
