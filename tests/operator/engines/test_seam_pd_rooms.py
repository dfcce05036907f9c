"""An engine whose P/D protocol sends both hops at once (the toy engine's rooms, SGLang's
shape: :mod:`tests.support.toy_engine.rooms`) runs through render, the router and the
transfer canary with no change outside the toy's folder and the protocol seam
(``PdProtocol.concurrent``): the same stack as test_seam_pd.py (:mod:`.toy_stack`)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.operator.builders import by_kind
from tests.operator.engines.toy_stack import Stack, canary_once, container, toy_stack
from tests.support.toy_engine.engine import ToyRooms
from tests.support.toy_engine.server import ROOM_WAIT_S
from tests.worker.serve.conftest import get, post

# addresses of their own: test_seam_pd.py's stack may run beside this one
ADDRESS = {"prefill": "127.0.8.1", "decode": "127.0.8.2"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from toy_stack(tmp_path_factory.mktemp("rooms"), ToyRooms(), ADDRESS)


def _hop(url: str, room: int) -> dict[str, float]:
    (hop,) = [h for h in get(url + "/toy/hops")["hops"] if h["room"] == room]
    return hop


def test_render_names_the_rooms_protocol_to_the_router_and_the_canary(stack: Stack) -> None:
    router = by_kind(stack.objects, "Deployment")[0]["spec"]["template"]
    decode = next(p for p in by_kind(stack.objects, "Pod") if "decode" in p["metadata"]["name"])
    for args in (container(router, "router")["args"], container(decode, "transfer-canary")["args"]):
        named = [b for a, b in itertools.pairwise(args) if a == "--pd-protocol"]
        assert named == [ToyRooms.pd_protocol]


def test_the_router_sends_both_hops_at_once_and_answers_the_decodes_tokens(stack: Stack) -> None:
    status, out = post(stack.router + "/v1/completions", {"prompt": "hello", "max_tokens": 6})
    assert status == 200, out
    _, alone = post(stack.decode + "/v1/completions", {"prompt": "hello", "max_tokens": 6})
    assert out["choices"][0]["text"] == alone["choices"][0]["text"]  # the same tokens
    assert out["disagg"]["proxy"]["path"] == "pd" and out["toy_kv"] == "fetched"
    pre, dec = _hop(stack.prefill, out["toy_room"]), _hop(stack.decode, out["toy_room"])
    # the decode hop began before the prefill hop answered: at once, not one after the other
    assert dec["start"] < pre["end"] and pre["start"] < dec["end"], (pre, dec)


def test_a_failed_prefill_fails_the_request_through_the_router_naming_it(stack: Stack) -> None:
    status, out = post(stack.router + "/v1/completions", {"prompt": "prefill-boom"})
    assert status == 502
    message = out["error"]["message"]
    assert message.startswith("prefill http://") and "answered 500: prefill-boom" in message


def test_the_canary_passes_through_the_rooms_protocol_and_measures_its_kv(stack: Stack) -> None:
    code, line = canary_once(stack)
    assert code == 0 and line["passed"], line
    assert line["kv_bytes"] == 4096 and line["kv_gbytes_per_second"] > 0
    assert line["took_ms"] < ROOM_WAIT_S * 1000  # neither hop waited out its room
