"""An engine whose P/D protocol is not vLLM's ``kv_transfer_params`` (the toy engine of
tests/support/toy_engine/: its operator class, its protocol and its server) runs through
render, the router and the transfer canary with no line of theirs changed (the stack:
:mod:`.toy_stack`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.operator.builders import by_kind
from tests.operator.engines.toy_stack import Stack, canary_once, container, toy_stack
from tests.support.toy_engine.engine import Toy
from tests.support.toy_engine.pd import COMPUTED, FETCHED
from tests.worker.serve.conftest import get, metric, post, wait_until

PROTOCOL = ["--pd-protocol", Toy.pd_protocol]
# the pods' own addresses (one loopback address each, as the local kubelet gives them)
ADDRESS = {"prefill": "127.0.7.1", "decode": "127.0.7.2"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from toy_stack(tmp_path_factory.mktemp("toy"), Toy(), ADDRESS)


def test_render_names_the_engines_protocol_to_the_router_and_the_canary(stack: Stack) -> None:
    pods = by_kind(stack.objects, "Pod")
    router = by_kind(stack.objects, "Deployment")[0]["spec"]["template"]
    canary = container(pods[1], "transfer-canary")
    for args in (container(router, "router")["args"], canary["args"]):
        assert [b for a, b in itertools.pairwise(args) if a == "--pd-protocol"] == PROTOCOL[1:]
    # the engine container runs the toy's own command, with no side channel
    assert container(pods[0], "engine")["command"][:3] == ["toy-serve", "--role", "prefill"]


def test_the_router_splits_a_request_in_the_toy_protocol(stack: Stack) -> None:
    before = get(stack.prefill + "/toy/stats")
    status, out = post(stack.router + "/v1/completions", {"prompt": "hello", "max_tokens": 6})
    assert status == 200, out
    _, alone = post(stack.decode + "/v1/completions", {"prompt": "hello", "max_tokens": 6})
    assert out["choices"][0]["text"] == alone["choices"][0]["text"]  # the same tokens
    assert out["disagg"]["proxy"]["path"] == "pd"
    assert out["toy_kv"] == "fetched" and out["toy_kv_bytes"] == 4096
    after = get(stack.prefill + "/toy/stats")
    assert after["prefills"] == before["prefills"] + 1 and after["held"] == 0
    # a field the toy protocol owns is the proxy's: refused from a client, naming it
    status, out = post(stack.router + "/v1/completions", {"prompt": "x", "toy_ticket": {}})
    assert status == 400 and out["error"]["message"].startswith("toy_ticket: ")


def test_a_failed_decode_hop_releases_the_ticket_the_toy_way(stack: Stack) -> None:
    before = get(stack.prefill + "/toy/stats")
    status, _ = post(stack.router + "/v1/completions", {"prompt": "boom", "max_tokens": 2})
    assert status == 502
    wait_until(
        lambda: get(stack.prefill + "/toy/stats")["drops"] == before["drops"] + 1,
        10, "the toy prefill's /toy/drop",
    )  # fmt: skip
    assert get(stack.prefill + "/toy/stats")["held"] == 0


def test_the_canary_passes_through_the_toy_protocol_and_measures_its_kv(stack: Stack) -> None:
    code, line = canary_once(stack)
    assert code == 0 and line["passed"], line
    assert line["kv_bytes"] == 4096 and line["kv_gbytes_per_second"] > 0


def test_a_lost_ticket_is_recomputing_to_the_router_and_the_canary(stack: Stack) -> None:
    """Last: the prefill loses every ticket from now on."""
    post(stack.prefill + "/toy/forget", {})
    recomputed = 'disagg_proxy_decode_recomputed_total{reason="decode_computed"}'
    before = metric(get(stack.router + "/metrics"), recomputed)
    status, out = post(stack.router + "/v1/completions", {"prompt": "again", "max_tokens": 3})
    assert status == 200 and out["toy_kv"] == "computed"  # right tokens, no P/D
    assert metric(get(stack.router + "/metrics"), recomputed) == before + 1
    code, line = canary_once(stack)
    assert code == 1 and line["problem"].startswith("DecodeRecomputing: the toy decode"), line
    page = get(stack.decode + "/metrics")
    assert metric(page, COMPUTED) >= 2 and metric(page, FETCHED) >= 2
