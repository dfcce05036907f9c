"""The routing policy: each request's path, the prefix index, the affinity order."""

from __future__ import annotations

import pytest

from disagg_worker.serve.proxy.rules import routing
from disagg_worker.serve.proxy.rules.routing import Policy, PrefixIndex, block_hashes, decide


def test_always_sends_every_request_through_prefill() -> None:
    route = decide(Policy(), 3, 0, [5, 5])
    assert (route.path, route.reason) == ("pd", routing.ALWAYS)


@pytest.mark.parametrize(
    ("tokens", "cached", "path", "reason"),
    [
        (99, 0, "decode", routing.BELOW),
        (100, 0, "pd", routing.ABOVE),
        (500, 450, "decode", routing.BELOW),  # only its 50 other tokens are computed
        (500, 400, "pd", routing.ABOVE),
        (50, 900, "decode", routing.BELOW),  # an estimate past the prompt counts it all
    ],
)
def test_threshold_counts_only_the_tokens_decode_does_not_hold(
    tokens: int, cached: int, path: str, reason: str
) -> None:
    policy = Policy(mode="threshold", threshold_tokens=100, prefix_cache=True)
    route = decide(policy, tokens, cached, [0])
    assert (route.path, route.reason) == (path, reason)
    assert route.non_cached_tokens == tokens - min(cached, tokens)


def test_without_a_prefix_cache_every_token_counts() -> None:
    policy = Policy(mode="threshold", threshold_tokens=100)
    assert decide(policy, 500, 450, [0]).path == "pd"
    assert decide(policy, 500, 450, [0]).cached_tokens == 0


def test_uncounted_prompts_take_both_hops() -> None:
    policy = Policy(mode="threshold", threshold_tokens=100)
    assert decide(policy, None, 0, [0]) == routing.Route("pd", routing.UNCOUNTED)


def test_busy_prefills_keep_long_prompts_on_decode() -> None:
    policy = Policy(mode="threshold", threshold_tokens=10, prefill_queue_limit=4)
    assert decide(policy, 50, 0, [4, 7]).reason == routing.PREFILL_BUSY
    assert decide(policy, 50, 0, [3, 7]).path == "pd"  # one prefill still has room


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"mode": "sometimes"}, "--disaggregate"),
        ({"threshold_tokens": -1}, "--threshold-tokens"),
        ({"block_tokens": 0}, "--block-tokens"),
        ({"prefill_queue_limit": 0}, "--prefill-queue-limit"),
    ],
)
def test_bad_policies_name_the_flag(kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        Policy(**kwargs)  # type: ignore[arg-type]


def test_needs_tokens_only_when_the_policy_reads_them() -> None:
    assert not Policy().needs_tokens
    assert Policy(prefix_cache=True).needs_tokens
    assert Policy(mode="threshold").needs_tokens


def test_block_hashes_chain_full_blocks_only() -> None:
    a = block_hashes(list(range(40)), 16)
    assert len(a) == 2  # the last 8 tokens are a partial block
    b = block_hashes([*range(16), 99, *range(17, 40)], 16)
    assert a[0] == b[0] and a[1] != b[1]
    # a block's hash covers what came before it: the same block after another prefix differs
    c = block_hashes([7, *range(1, 16), *range(16, 32)], 16)
    assert c[1] != a[1]


def test_index_matches_the_longest_held_prefix_and_forgets_the_oldest() -> None:
    index = PrefixIndex(capacity=3)
    h = block_hashes(list(range(64)), 16)
    index.record("d0", h[:2])
    assert index.matched("d0", h) == 2
    assert index.matched("d1", h) == 0
    index.record("d0", block_hashes([9] * 32, 16))  # 2 more blocks: the oldest goes
    assert index.matched("d0", h) == 0  # its first block was forgotten: no prefix matches
    index.keep(["d1"])
    assert index.matched("d0", block_hashes([9] * 32, 16)) == 0


def test_affinity_prefers_the_prefix_then_the_least_loaded() -> None:
    inflight = [3, 0, 1]
    assert routing.affinity_order(inflight, [2, 0, 2]) == [2, 0, 1]
    assert routing.affinity_order(inflight, [0, 0, 0]) == [1, 2, 0]
