"""`disagg model tiny-llama DIR`: a tiny, deterministic Llama checkpoint for real vLLM runs.

CLI layer (writes files). No model hub is needed: the weights are random with a fixed
seed and the tokenizer is a byte-level BPE trained in process on built-in text, so two
runs write the same bytes. vLLM loads it like any Hugging Face checkpoint (config.json,
model.safetensors, tokenizer.json, tokenizer_config.json with a chat template).

The shape is small enough for two vLLM engines on a 2-core machine (2.75 M parameters,
4 layers, 2 KV heads of 32) and Llama-shaped where it matters for the KV path: grouped
KV heads, paged attention, NixlConnector's layer-major KV layout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from disagg_contract import commandline

VOCAB_SIZE = 1024
SEED = 0
SHAPE = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
}
SPECIAL = ("<s>", "</s>", "<unk>", "<pad>")
# One line per message, then the assistant's turn: enough for /v1/chat/completions.
CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)

_TEXT = (
    "The quick brown fox jumps over the lazy dog. A prefill server computes the key and "
    "value cache for a prompt, and a decode server reads that cache over the network and "
    "generates the rest of the answer one token at a time. Kubernetes schedules pods onto "
    "nodes; an operator watches custom resources and reconciles the cluster towards the "
    "desired state. Every morning the baker opens the shop, lights the oven, and sells "
    "fresh bread to the people of the town. Rivers flow to the sea, clouds carry rain over "
    "the mountains, and the seasons turn from spring to summer, autumn and winter. Numbers "
    "such as one, two, three, four, five, six, seven, eight, nine and ten are counted by "
    "children at school, who also learn to read, to write and to ask good questions. "
)


def corpus() -> list[str]:
    """The tokenizer's training text: fixed, so the vocabulary is too."""
    things = ("cat", "server", "river", "model", "token", "engine")
    looks = ("small", "fast", "quiet", "bright", "warm")
    others = ("dog", "cache", "tree", "network")
    moods = ("large", "slow", "loud", "dark")
    lines = [_TEXT]
    n = 0
    for a in things:
        for b in looks:
            for c in others:
                for d in moods:
                    lines.append(f"Sentence {n}: the {a} is {b} and the {c} is {d}. ")
                    n += 1
    return lines


def _tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=list(SPECIAL),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    bos = SPECIAL[0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=SPECIAL[0],
        eos_token=SPECIAL[1],
        unk_token=SPECIAL[2],
        pad_token=SPECIAL[3],
        model_max_length=SHAPE["max_position_embeddings"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def write(out: Path) -> dict[str, Any]:
    """Write the checkpoint into ``out`` (created); returns what was written."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # same bytes every run
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    tokenizer.save_pretrained(str(out))
    torch.manual_seed(SEED)
    config = LlamaConfig(
        hidden_size=SHAPE["hidden_size"],
        intermediate_size=SHAPE["intermediate_size"],
        num_hidden_layers=SHAPE["num_hidden_layers"],
        num_attention_heads=SHAPE["num_attention_heads"],
        num_key_value_heads=SHAPE["num_key_value_heads"],
        max_position_embeddings=SHAPE["max_position_embeddings"],
        vocab_size=VOCAB_SIZE,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(str(out), safe_serialization=True)
    for f in out.iterdir():
        # safetensors writes 0600; a model on a shared volume is read by the pods' own
        # user (uid 65532 in the images), never its writer's
        f.chmod(0o644)
    return {
        "dir": str(out),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": VOCAB_SIZE,
        **SHAPE,
    }


MODELS = {"tiny-llama": write}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg model",
        description="Write a local model checkpoint (no model hub needed). tiny-llama: a "
        "seeded 4-layer Llama with a byte-level BPE tokenizer, for real vLLM runs on CPU.",
    )
    p.add_argument("name", choices=sorted(MODELS))
    p.add_argument("dir", help="output directory (created)")
    args = p.parse_args(argv)
    try:
        import tokenizers  # noqa: F401
        import transformers  # noqa: F401
    except ModuleNotFoundError as e:
        print(
            f"disagg model: missing {e.name!r}; pip install 'disagg[vllm]' "
            "(or `make up-vllm`, which installs it)",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    info = MODELS[args.name](Path(args.dir))
    info["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(info))
    return 0
