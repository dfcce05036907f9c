"""The data path under faults and load, with real worker processes and real NIXL: a dead
peer costs only the requests that name it, a failed decode hop frees prefill's blocks at
once, a restarted prefill is re-handshaken, a claim binds the exact blocks and prompt, and
a busy cache queues requests instead of failing them."""

from __future__ import annotations

import contextlib
import random
import signal
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from disagg_worker.model.model import BOS
from disagg_worker.transfer.peers import HANDSHAKE_TIMEOUT_S
from tests.worker.serve.conftest import StartWorker, Workers, get, post, wait_until


def _prompt(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [BOS] + [rng.randrange(256) for _ in range(n - 1)]


def _prefill(url: str, prompt: list[int]) -> dict[str, Any]:
    body = {"prompt": prompt, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    status, out = post(url + "/v1/completions", body)
    assert status == 200, out
    params: dict[str, Any] = out["kv_transfer_params"]
    return params


def _ghost_params(port: int, blocks: int) -> dict[str, Any]:
    """kv_transfer_params naming a prefill that is not there (dead or silent)."""
    return {
        "do_remote_prefill": True,
        "remote_engine_id": f"ghost-{port}",
        "remote_block_ids": list(range(blocks)),
        "remote_host": "127.0.0.1",
        "remote_port": port,
        "remote_request_id": f"gone-{port}",
    }


class SilentPeer:
    """A TCP port that accepts connections, counts them and never says a word (a hung
    peer). ``connected`` is set at the first connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port: int = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # closed: the test is over
            while True:
                conn, _ = self.sock.accept()
                self.accepted.append(conn)  # kept open, never answered
                self.connected.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent_peer() -> Iterator[SilentPeer]:
    peer = SilentPeer()
    yield peer
    peer.close()


# A handshake connects twice: a plain TCP connect first (a refused one fails at once), then
# the side channel's zmq socket (transfer/peers.py).
CONNECTIONS_PER_HANDSHAKE = 2


@pytest.fixture
def refused_port() -> int:
    """A port nobody listens on: connecting is refused at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    sock.close()
    return port


def _timed(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
    t0 = time.monotonic()
    status, out = post(url, body)
    return status, out, time.monotonic() - t0


def test_a_silent_prefill_costs_only_the_requests_that_name_it(
    workers: Workers, silent_peer: SilentPeer
) -> None:
    """16 requests name a hung prefill while healthy requests flow: the healthy ones never
    wait for the hung one's handshake timeout, and the hung one is backed off."""
    pre, dec = workers.worker("prefill"), workers.worker("decode")
    proxy = workers.proxy([pre.url], [dec.url]) + "/v1/completions"
    prompt = _prompt(40, 1)
    ghost = _ghost_params(silent_peer.port, 3)
    bad = {"prompt": prompt, "max_tokens": 2, "kv_transfer_params": ghost}
    good = {"prompt": prompt, "max_tokens": 2}
    assert post(proxy, good)[0] == 200  # the healthy pair is connected
    with ThreadPoolExecutor(24) as pool:
        bads = [pool.submit(_timed, dec.url + "/v1/completions", bad) for _ in range(16)]
        # the bad ones are in the decode worker once its handshake reaches the silent peer
        assert silent_peer.connected.wait(HANDSHAKE_TIMEOUT_S)
        goods = [pool.submit(_timed, proxy, good) for _ in range(8)]
        good_results = [f.result() for f in goods]
        bad_results = [f.result() for f in bads]
    for status, out, took in good_results:
        assert status == 200, out
        assert took < HANDSHAKE_TIMEOUT_S, f"a healthy request waited {took:.1f} s"
    assert {status for status, _, _ in bad_results} == {502}, bad_results[0][1]
    # one handshake timed out; the others learnt it from it (one handshake per peer, then
    # back-off), not from 16 handshakes of their own: the peer saw one handshake's connections
    handshakes = len(silent_peer.accepted)
    assert 1 <= handshakes <= CONNECTIONS_PER_HANDSHAKE, handshakes
    status, out, _ = _timed(dec.url + "/v1/completions", bad)
    assert status == 502, out
    assert "backing off" in out["error"]["message"]
    assert len(silent_peer.accepted) == handshakes  # backed off: no new connection


def test_a_refused_connection_fails_at_once(start_worker: StartWorker, refused_port: int) -> None:
    dec = start_worker("decode")
    prompt = _prompt(40, 2)
    body = {"prompt": prompt, "max_tokens": 2, "kv_transfer_params": _ghost_params(refused_port, 3)}
    status, out, took = _timed(dec.url + "/v1/completions", body)
    assert status == 502, out
    assert "refused" in out["error"]["message"]
    assert took < HANDSHAKE_TIMEOUT_S / 2, f"took {took:.1f} s"
    assert get(dec.url + "/debug/blocks")["used"] == 0


def test_a_failed_decode_hop_frees_prefills_blocks_at_once(
    workers: Workers, refused_port: int
) -> None:
    """The decode is down: the proxy answers 502 and tells prefill to free the blocks,
    long before the 30 s lease would."""
    pre = workers.worker("prefill", block_lease_s=30)
    proxy = workers.proxy([pre.url], [f"http://127.0.0.1:{refused_port}"]) + "/v1/completions"
    status, out = post(proxy, {"prompt": _prompt(40, 3), "max_tokens": 2})
    assert status == 502, out
    wait_until(lambda: get(pre.url + "/debug/blocks")["used"] == 0, 3.0, "release by the proxy")


def test_a_prefill_restarted_at_the_same_address_is_handshaken_again(workers: Workers) -> None:
    pre, dec = workers.worker("prefill", "p0"), workers.worker("decode")
    ports = {k: pre.ready[k] for k in ("http_port", "side_channel_port")}
    proxy = workers.proxy([pre.url], [dec.url]) + "/v1/completions"
    body = {"prompt": _prompt(40, 4), "max_tokens": 3, "ignore_eos": True}
    status, first = post(proxy, body)
    assert status == 200, first
    pre.proc.send_signal(signal.SIGKILL)
    pre.proc.wait()
    again = workers.worker("prefill", "p0", **ports)  # a container restart: same name, address
    assert again.url == pre.url
    status, out = post(proxy, body)
    assert status == 200, out
    assert out["choices"][0]["token_ids"] == first["choices"][0]["token_ids"]


def test_a_claim_binds_the_exact_ordered_blocks(start_worker: StartWorker) -> None:
    pre, dec = start_worker("prefill"), start_worker("decode")
    prompt = _prompt(40, 5)
    params = _prefill(pre.url, prompt)
    assert len(params["remote_block_ids"]) == 3
    swapped = {**params, "remote_block_ids": params["remote_block_ids"][::-1]}
    status, out = post(
        dec.url + "/v1/completions", {"prompt": prompt, "kv_transfer_params": swapped}
    )
    assert status == 502, out
    assert "holds blocks" in out["error"]["message"]


def test_decode_refuses_kv_computed_for_another_prompt(start_worker: StartWorker) -> None:
    pre, dec = start_worker("prefill"), start_worker("decode")
    params = _prefill(pre.url, _prompt(40, 6))
    other = _prompt(40, 7)
    status, out = post(dec.url + "/v1/completions", {"prompt": other, "kv_transfer_params": params})
    assert (status, out["error"]["param"]) == (400, "kv_transfer_params.prompt_digest"), out
    # without the digest in the params, prefill's answer to the claim refuses it
    stripped = {k: v for k, v in params.items() if k != "prompt_digest"}
    status, out = post(
        dec.url + "/v1/completions", {"prompt": other, "kv_transfer_params": stripped}
    )
    assert status == 400, out
    assert "another prompt" in out["error"]["message"]
    assert get(dec.url + "/debug/blocks")["used"] == 0


def test_a_busy_cache_queues_requests_instead_of_failing_them(workers: Workers) -> None:
    """Eight 500-token requests at once on caches that fit two: all wait their turn."""
    pre = workers.worker("prefill", num_blocks=72)
    dec = workers.worker("decode", num_blocks=72)
    proxy = workers.proxy([pre.url], [dec.url]) + "/v1/completions"
    bodies = [{"prompt": _prompt(500, 10 + i), "max_tokens": 4} for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda b: post(proxy, b), bodies))
    assert [status for status, _ in results] == [200] * 8, [out for _, out in results]
    wait_until(lambda: get(pre.url + "/debug/blocks")["used"] == 0, 5, "prefill release")
