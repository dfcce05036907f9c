"""The routing policy with real workers and real NIXL: short prompts stay on decode, long
ones go through prefill, repeated prefixes return to their decode, and a decode whose
kv_transfer_params were dropped on the way is counted at the proxy and at the worker."""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from disagg_tools.bench.relay import params_dropper
from disagg_tools.local.children import serve_in_thread
from disagg_worker.model.model import BOS
from tests.worker.serve.conftest import Workers, get, metric, post

THRESHOLD = 64


@dataclass
class Stack:
    agg: str
    prefill: str
    decodes: list[str]
    proxy: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    group = Workers(tmp_path_factory.mktemp("routing"))
    try:
        children = [group.spawn(r, num_blocks=64) for r in ("both", "prefill", "decode", "decode")]
        group.ready(*children)
        agg, p0, d0, d1 = (c.url for c in children)  # type: ignore[attr-defined]
        proxy = group.proxy(
            [p0], [d0, d1], "--policy", "round-robin", "--disaggregate", "threshold",
            "--threshold-tokens", str(THRESHOLD), "--decode-prefix-cache",
        )  # fmt: skip
        yield Stack(agg, p0, [d0, d1], proxy)
    finally:
        group.stop()


def _prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [BOS] + [rng.randrange(256) for _ in range(n - 1)]


def _tokens(url: str, body: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    status, out = post(url, body)
    assert status == 200, out
    return out["choices"][0]["token_ids"], out


def _requests(url: str, role: str) -> float:
    return metric(get(url + "/metrics"), f'disagg_requests_total{{kind="{role}",outcome="ok"}}')


def test_short_prompts_stay_on_decode_long_ones_take_both_hops(stack: Stack) -> None:
    before = _requests(stack.prefill, "prefill")
    for n, path in ((THRESHOLD - 1, "decode"), (THRESHOLD, "pd"), (300, "pd"), (5, "decode")):
        body = {"prompt": _prompt(n, n), "max_tokens": 6}
        want, _ = _tokens(stack.agg + "/v1/completions", body)
        got, out = _tokens(stack.proxy + "/v1/completions", body)
        assert got == want, n
        figures = out["disagg"]["proxy"]
        assert (figures["path"], figures["prompt_tokens"]) == (path, n)
        assert out["disagg"]["kv_source"] == ("transferred" if path == "pd" else "computed")
    assert _requests(stack.prefill, "prefill") == before + 2  # the two long prompts only
    text = get(stack.proxy + "/metrics")
    assert metric(text, 'disagg_proxy_requests_total{path="decode",reason="below_threshold"}') >= 2
    assert metric(text, 'disagg_proxy_requests_total{path="pd",reason="above_threshold"}') >= 2
    for d in stack.decodes:  # decode alone on purpose is not a fallback
        assert metric(get(d + "/metrics"), "disagg_decode_recomputed_total") == 0


def test_chat_prompts_are_counted_by_the_engine(stack: Stack) -> None:
    long = {"messages": [{"role": "user", "content": "x" * 200}], "max_tokens": 3}
    short = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    for body, path in ((long, "pd"), (short, "decode")):
        want, _ = _tokens(stack.agg + "/v1/chat/completions", body)
        got, out = _tokens(stack.proxy + "/v1/chat/completions", body)
        assert got == want
        assert out["disagg"]["proxy"]["path"] == path
    status, counted = post(stack.decodes[0] + "/tokenize", {"messages": short["messages"]})
    assert status == 200 and counted["count"] == len(counted["tokens"]) > 2


def test_counting_text_prompts_leaves_the_round_robin_turn_alone(stack: Stack) -> None:
    seen = []
    for i in range(4):  # text: the router asks a decode's /tokenize before it picks
        body = {"prompt": f"{i} " + "round robin " * 20, "max_tokens": 2}
        _, out = _tokens(stack.proxy + "/v1/completions", body)
        assert out["disagg"]["proxy"]["prompt_tokens"] == len(body["prompt"]) + 1  # BOS
        seen.append(stack.decodes.index(out["disagg"]["proxy"]["decode_url"]))
    assert seen in ([0, 1, 0, 1], [1, 0, 1, 0])


def test_a_repeated_prefix_returns_to_the_decode_that_holds_it(stack: Stack) -> None:
    a, b = _prompt(200, 1), _prompt(200, 2)
    cases = [  # (prompt, path, cached tokens): round-robin alone would pick d0, d1, d0, d1
        (a, "pd", 0),
        (b, "pd", 0),
        (b, "decode", 192),  # 12 of its blocks held there: 8 other tokens
        (b[:100] + [7] * 100, "pd", 96),  # 6 blocks held: 104 others, over the threshold
    ]
    order = []
    for prompt, path, cached in cases:
        want, _ = _tokens(stack.agg + "/v1/completions", {"prompt": prompt, "max_tokens": 2})
        got, out = _tokens(stack.proxy + "/v1/completions", {"prompt": prompt, "max_tokens": 2})
        figures = out["disagg"]["proxy"]
        assert (figures["path"], figures["cached_tokens"], got) == (path, cached, want)
        order.append(stack.decodes.index(figures["decode_url"]))
    assert order[0] != order[1] and order[2] == order[1] and order[3] == order[1]


def test_a_decode_that_lost_its_params_is_counted_at_proxy_and_worker(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory
) -> None:
    d = stack.decodes[0]
    with serve_in_thread(params_dropper(d)) as relay:
        group = Workers(tmp_path_factory.mktemp("dropped"))
        try:
            proxy = group.proxy([stack.prefill], [relay])
            body = {"prompt": _prompt(100, 5), "max_tokens": 4}
            want, _ = _tokens(stack.agg + "/v1/completions", body)
            got, out = _tokens(proxy + "/v1/completions", body)
            assert got == want  # the tokens hide it ...
            assert out["disagg"]["kv_source"] == "computed"
            text = get(proxy + "/metrics")  # ... the counters do not
            counted = 'disagg_proxy_decode_recomputed_total{reason="decode_computed"}'
            assert metric(text, counted) == 1
            worker = 'disagg_decode_recomputed_total{reason="no_kv_transfer_params"}'
            assert metric(get(d + "/metrics"), worker) == 1
        finally:
            group.stop()


def test_the_front_door_lists_models_and_refuses_before_prefill(stack: Stack) -> None:
    """The first-hour case: GET /v1/models through the router is the engine's answer, and
    max_tokens 0 on a prompt long enough for both hops is refused with its field named
    before any prefill; a field only the engine refuses comes back as the engine said it."""
    assert get(stack.proxy + "/v1/models") == get(stack.decodes[0] + "/v1/models")
    before = _requests(stack.prefill, "prefill")
    long = _prompt(300, 11)
    status, out = post(stack.proxy + "/v1/completions", {"prompt": long, "max_tokens": 0})
    assert status == 400 and out["error"]["param"] == "max_tokens", out
    assert out["error"]["type"] == "BadRequestError"
    greedy_only = {"prompt": long, "max_tokens": 2, "temperature": 0.5}
    status, out = post(stack.proxy + "/v1/completions", greedy_only)
    assert (status, out) == post(stack.agg + "/v1/completions", greedy_only)
    assert out["error"]["param"] == "temperature"
    _tokens(stack.proxy + "/v1/completions", {"prompt": long, "max_tokens": 2})
    assert _requests(stack.prefill, "prefill") == before + 1  # the good request alone
