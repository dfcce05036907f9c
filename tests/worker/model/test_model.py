"""Reference model: seeded weights, correct causal attention over pages, and the
prefill-in-one-cache / decode-in-another equivalence the disaggregated path relies on."""

from __future__ import annotations

import pytest
import torch

from disagg_worker.model.kvcache import BlockAllocator, PagedKVCache
from disagg_worker.model.model import (
    BOS,
    EOS,
    PRESETS,
    GenerationRequest,
    ReferenceModel,
    decode,
    encode,
    get_preset,
    kv_layout,
)

torch.set_num_threads(1)  # tiny shapes: threads only add contention on shared cores
SPEC = get_preset("tiny")


def _model(seed: int = 0, num_blocks: int = 64) -> ReferenceModel:
    return ReferenceModel(SPEC, PagedKVCache(kv_layout(SPEC, 16, num_blocks)), seed)


def _prompt(n: int, salt: int = 0) -> list[int]:
    return [BOS] + [(i * 31 + salt) % 256 for i in range(n - 1)]


def test_tiny_preset_is_small_gqa_and_float32() -> None:
    assert (SPEC.num_layers, SPEC.d_model, SPEC.num_heads, SPEC.num_kv_heads) == (4, 256, 8, 2)
    layout = kv_layout(SPEC, 16, 128)
    assert layout.dtype == "float32" and layout.block_major
    assert layout.bytes_per_token == 2 * 4 * 2 * 32 * 4
    assert SPEC.max_positions >= 2048 + 128


def test_unknown_preset_names_the_setting() -> None:
    with pytest.raises(ValueError, match=r"DISAGG_MODEL: unknown reference model 'huge'"):
        get_preset("huge")
    assert "tiny" in PRESETS


def test_byte_tokenizer_round_trips_utf8() -> None:
    tokens = encode("héllo")
    assert tokens[0] == BOS and len(tokens) == 1 + len("héllo".encode())
    assert decode([*tokens, EOS]) == "héllo"


def test_weights_come_from_the_seed() -> None:
    a, b, c = _model(0), _model(0), _model(1)
    assert torch.equal(a.w["l0.wq"], b.w["l0.wq"])
    assert not torch.equal(a.w["l0.wq"], c.w["l0.wq"])
    ask = GenerationRequest(_prompt(20), 8, ignore_eos=True)
    outs = [e.generate(ask, list(range(3))).tokens for e in (a, b, c)]
    assert outs[0] == outs[1] and outs[0] != outs[2]


def test_chunked_and_stepwise_forward_agree() -> None:
    """Causal masking and rotary positions are right: a prompt run in one chunk, in two
    chunks (the masked path) or token by token gives the same next-token logits."""
    prompt = _prompt(45)
    whole, halves, steps = _model(), _model(), _model()
    table = list(range(3))
    ref = whole.forward(prompt, 0, table)
    halves.forward(prompt[:20], 0, table)
    two = halves.forward(prompt[20:], 20, table)
    for pos, tok in enumerate(prompt):
        one = steps.forward([tok], pos, table)
    torch.testing.assert_close(two, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(one, ref, rtol=1e-4, atol=1e-4)


def test_future_tokens_do_not_leak_into_the_past() -> None:
    model = _model()
    table = list(range(2))
    base = model.forward(_prompt(10), 0, table)
    changed = model.forward([*_prompt(10), 99, 98], 0, table)
    shorter = model.forward(_prompt(10), 0, table)
    assert torch.equal(base, shorter)
    assert not torch.equal(base, changed)


def test_block_placement_does_not_change_the_output() -> None:
    model = _model()
    six = GenerationRequest(_prompt(70), 6, ignore_eos=True)
    contiguous = model.generate(six, [0, 1, 2, 3, 4, 5])
    scattered = model.generate(six, [40, 3, 17, 9, 63, 22])
    assert contiguous.tokens == scattered.tokens


@pytest.mark.parametrize("n", [1, 15, 16, 17, 33])
def test_decode_from_copied_blocks_equals_one_model(n: int) -> None:
    """The disaggregated contract in one process: prefill (max_tokens 1) in one cache, the
    blocks' bytes copied into other block ids of another cache, decode continues there."""
    prefill, decoder, alone = _model(), _model(), _model()
    prompt, gen = _prompt(n, salt=n), 7
    need = alone.blocks_needed(n, gen)
    expected = alone.generate(GenerationRequest(prompt, gen, ignore_eos=True), list(range(need)))

    src = BlockAllocator(64)
    src.allocate(5)  # prefill's blocks do not start at 0
    p_table = src.allocate(prefill.blocks_needed(n, 1))
    first = prefill.generate(GenerationRequest(prompt, 1, ignore_eos=True), p_table)
    d_table = list(range(30, 30 + need))
    copied = d_table[: len(p_table)]
    decoder.cache.tensor[:, copied] = prefill.cache.tensor[:, p_table]  # every head's region
    cached = GenerationRequest(prompt, gen, ignore_eos=True, prompt_cached=True)
    got = decoder.generate(cached, d_table)
    assert first.tokens == expected.tokens[:1]
    assert got.tokens == expected.tokens
    # given the prefill's first token, decode skips that step and still continues exactly
    decoder.cache.tensor[:, d_table[len(p_table) :]] = 0
    given = GenerationRequest(prompt, gen, True, prompt_cached=True, first_token=first.tokens[0])
    told = decoder.generate(given, d_table)
    assert told.tokens == expected.tokens


def test_a_given_first_token_is_used_unless_min_tokens_masks_it() -> None:
    model = _model()
    prompt = _prompt(20, salt=3)
    table = list(range(model.blocks_needed(20, 4)))
    # the prompt's K/V in the blocks
    model.generate(GenerationRequest(prompt, 1, ignore_eos=True), table)
    given = GenerationRequest(prompt, 3, prompt_cached=True, first_token=42)
    planted = model.generate(given, table)
    assert planted.tokens[0] == 42  # taken as given, not computed
    eos = GenerationRequest(prompt, 3, min_tokens=2, prompt_cached=True, first_token=EOS)
    masked = model.generate(eos, table)
    assert masked.tokens[0] != EOS  # EOS may not come yet: decode computes the first token


def test_generation_stops_at_eos_unless_told_not_to() -> None:
    model = _model()
    prompt = _prompt(5)
    first = model.generate(GenerationRequest(prompt, 1), [0]).tokens[0]
    model.w["lm_head"][EOS] = model.w["lm_head"][first] * 2  # make EOS win the first step
    stopped = model.generate(GenerationRequest(prompt, 5), [0])
    assert stopped.tokens == [EOS] and stopped.finish_reason == "stop"
    kept = model.generate(GenerationRequest(prompt, 5, ignore_eos=True), [0])
    assert len(kept.tokens) == 5 and kept.finish_reason == "length"
    seen: list[int] = []
    held = model.generate(GenerationRequest(prompt, 5, min_tokens=3), [0], seen.append)
    assert held.tokens[0] == first and EOS not in held.tokens[:3]  # EOS masked, not skipped
    assert seen == held.tokens


@pytest.mark.parametrize(
    ("prompt", "max_tokens", "message"),
    [
        ([], 1, "prompt: must hold at least one token"),
        ([BOS, 300], 1, r"prompt: token ids must be in \[0, 258\)"),
        ([BOS], 0, "max_tokens: must be at least 1"),
        ([BOS] * 4000, 100, r"max_tokens: prompt \(4000\) \+ max_tokens \(100\) exceeds"),
    ],
)
def test_bad_requests_name_the_field(prompt: list[int], max_tokens: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _model().check_request(prompt, max_tokens)


def test_blocks_needed_covers_prompt_and_all_but_the_last_token() -> None:
    model = _model()
    assert model.blocks_needed(16, 1) == 1
    assert model.blocks_needed(16, 2) == 2
    assert model.blocks_needed(1, 16) == 1
