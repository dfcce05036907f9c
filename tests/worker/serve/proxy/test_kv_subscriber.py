"""The router on its decodes' KV events (serve/proxy/kv_subscriber.py, planner.py): real
vLLM batches (the fixture of test_kv_events.py) published on real ZMQ PUB sockets, one per
decode on its own loopback address, as each vLLM pod publishes on the rendered port."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pytest
import zmq

from disagg_worker.serve.proxy.metrics import ProxyMetrics
from disagg_worker.serve.proxy.planner import Planner
from disagg_worker.serve.proxy.revisions import Pair, Pairs
from disagg_worker.serve.proxy.rules import kv_events as kv
from disagg_worker.serve.proxy.rules.routing import Policy
from disagg_worker.serve.proxy.upstream import Pool, Request
from tests.worker.serve.proxy.test_kv_events import DATA, frames, load

CAPTURE = load(DATA / "vllm-kv-events-sha256_cbor.json")
HOSTS = ("127.0.0.1", "127.0.0.2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


class Setup:
    def __init__(self, port: int) -> None:
        self.port = port
        self.ctx = zmq.Context()
        self.pubs = [self._pub(h) for h in HOSTS]
        self.decode = Pool([f"http://{h}:8000" for h in HOSTS], "least-loaded")
        prefill = Pool(["http://127.0.0.1:9"], "least-loaded")
        self.metrics = ProxyMetrics()
        policy = Policy(
            mode="threshold", threshold_tokens=64, prefix_cache=True, block_tokens=32,
            prefix_index="events", kv_events_port=port, kv_events_topic=CAPTURE["topic"],
            hash_algo=CAPTURE["hash_algo"],
            hash_seed=CAPTURE["pythonhashseed"],
        )  # fmt: skip
        self.planner = Planner(policy, Pairs([Pair("", prefill, self.decode)], "least-loaded"),
                               self._tokenize, self.metrics)  # fmt: skip

    def _pub(self, host: str) -> zmq.Socket:
        sock = self.ctx.socket(zmq.PUB)
        sock.bind(f"tcp://{host}:{self.port}")
        return sock

    async def _tokenize(self, role: str, url: str, body: dict[str, Any], *_: Any) -> dict[str, Any]:
        return {"tokens": body["prompt"]}

    def publish(self, host: int, step: int) -> None:
        for f in frames(CAPTURE["steps"][step]):
            self.pubs[host].send_multipart(f)

    def url(self, host: int) -> str:
        return self.decode.backends[host].url

    def fallbacks(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "disagg_proxy_prefix_index_fallback_total", {"reason": reason}
        )
        return value or 0.0


async def until(check: Callable[[], bool], what: str, limit_s: float = 5.0) -> None:
    end = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < end, f"not within {limit_s} s: {what}"
        await asyncio.sleep(0.02)


@pytest.fixture
async def setup() -> AsyncIterator[Setup]:
    s = Setup(free_port())
    await s.planner.start()
    await asyncio.sleep(0.3)  # SUB sockets connect and subscribe (ZMQ's slow joiner)
    try:
        yield s
    finally:
        await s.planner.close()
        for pub in s.pubs:
            pub.close(linger=0)
        s.ctx.term()


def request(tokens: list[int]) -> Request:
    return Request("/v1/completions", {"prompt": tokens}, {}, time.monotonic() + 10)


async def test_the_decode_that_holds_the_prefix_is_picked_by_its_events(setup: Setup) -> None:
    assert setup.planner.events is not None
    for step in range(3):  # the first three turns ran on the second decode
        setup.publish(1, step)
    engine = setup.planner.events.engine(setup.url(1))
    turn3 = kv.Hashing("sha256_cbor", "42", 32).chain(CAPTURE["steps"][2]["prompt"])
    await until(lambda: engine is not None and engine.matched(turn3) == len(turn3), "events")
    turn4 = CAPTURE["steps"][3]["prompt"]
    plan = await setup.planner.plan(request(turn4))
    assert plan.decode is not None and plan.decode.url == setup.url(1)
    assert plan.route.cached_tokens == len(turn3) * 32
    assert (plan.route.path, plan.route.reason) == ("decode", "below_threshold")
    assert setup.fallbacks(kv.NO_STREAM) == 1  # the first decode has said nothing yet


async def test_a_gap_falls_back_to_the_approximate_index(setup: Setup) -> None:
    setup.publish(1, 0)
    assert setup.planner.events is not None
    engine = setup.planner.events.engine(setup.url(1))
    await until(lambda: engine is not None and engine.lost is None, "first batch")
    setup.pubs[1].send_multipart([b"kv", (9).to_bytes(8, "big"), msgspec.msgpack.encode([0.0, []])])
    await until(lambda: engine is not None and engine.lost == kv.GAP, "the gap")
    plan = await setup.planner.plan(request(CAPTURE["steps"][1]["prompt"]))
    assert plan.route.cached_tokens == 0  # the approximate index was never told of it
    assert setup.fallbacks(kv.GAP) == 1


async def test_a_closed_socket_reads_as_disconnected(setup: Setup) -> None:
    setup.publish(0, 0)
    assert setup.planner.events is not None
    engine = setup.planner.events.engine(setup.url(0))
    await until(lambda: engine is not None and engine.lost is None, "first batch")
    setup.pubs[0].close(linger=0)
    await until(lambda: engine is not None and engine.lost == kv.DISCONNECTED, "disconnect")


async def test_a_decode_that_left_is_dropped(setup: Setup) -> None:
    assert setup.planner.events is not None
    setup.decode.set_urls([f"http://{HOSTS[0]}:8000"])
    await setup.planner.events.sync()
    assert setup.planner.events.engine(f"http://{HOSTS[1]}:8000") is None
    assert setup.planner.events.engine(f"http://{HOSTS[0]}:8000") is not None


def test_endpoints_follow_the_pod_address() -> None:
    from disagg_worker.serve.proxy.kv_subscriber import endpoint

    assert endpoint("http://10.1.2.3:8000", 5557) == "tcp://10.1.2.3:5557"
    assert endpoint("http://[fd00::5]:8000", 5557) == "tcp://[fd00::5]:5557"
