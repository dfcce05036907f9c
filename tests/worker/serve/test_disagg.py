"""Disaggregated serving with two real worker processes and real NIXL on loopback:
output equals one process token for token; blocks are freed by decode's notification or
by the lease; a prefill that dies between the two hops gives an error naming the cause."""

from __future__ import annotations

import random
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from disagg_worker.model.model import BOS
from disagg_worker.serve.proxy.app import build_app
from disagg_worker.serve.proxy.config import ProxyConfig
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.rules.kv_params import KvTransferParams
from tests.worker.serve.conftest import (
    StartWorker,
    Workers,
    get,
    metric,
    post,
    stream,
    wait_until,
)

GEN = 4
ROLES = ("both", "prefill", "decode", "decode")
EDGES = [1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513]


def _lengths() -> list[int]:
    """50 prompt lengths in 1..1000: every block boundary ±1 up to 513, then seeded picks."""
    rng = random.Random(6)
    picks = rng.sample([n for n in range(2, 1000) if n not in EDGES], 28)
    return sorted([*EDGES, *picks, 999, 1000])


def _prompt(n: int, rng: random.Random) -> list[int]:
    return [BOS] + [rng.randrange(256) for _ in range(n - 1)]


@dataclass
class Stack:
    agg: Any
    prefills: list[Any]
    decodes: list[Any]
    proxy: str


def _stack(group: Workers, device: str) -> Stack:
    """One aggregated worker; a prefill and two decodes behind a least-loaded proxy, the
    second decode asking the prefill to push (DISAGG_TRANSFER_MODE=push)."""
    push = {3: {"transfer_mode": "push"}}
    children = [
        group.spawn(role, device=device, num_blocks=72, **push.get(i, {}))
        for i, role in enumerate(ROLES)
    ]
    group.ready(*children)
    agg, p0, d0, d1 = children
    proxy = group.proxy([p0.url], [d0.url, d1.url], "--policy", "least-loaded")
    return Stack(agg, [p0], [d0, d1], proxy + "/v1/completions")


@pytest.fixture(scope="module")
def cpu_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    group = Workers(tmp_path_factory.mktemp("stack"))
    try:
        yield _stack(group, "cpu")
    finally:
        group.stop()


def _released(stack: Stack, reason: str) -> float:
    name = f'disagg_kv_block_releases_total{{reason="{reason}"}}'
    return sum(metric(get(p.url + "/metrics"), name) for p in stack.prefills)


def _all_released(stack: Stack) -> None:
    for p in stack.prefills:
        wait_until(lambda p=p: get(p.url + "/debug/blocks")["used"] == 0, 30, "release")


def _check_invariant(stack: Stack, n: int) -> None:
    rng = random.Random(1000)
    lengths = _lengths()[:: max(1, len(_lengths()) // n)][:n]
    assert len(lengths) == n and lengths[0] == 1 and max(lengths) <= 1000
    before = {why: _released(stack, why) for why in ("notified", "pushed")}
    mismatches = []
    for length in lengths:
        body = {"prompt": _prompt(length, rng), "max_tokens": GEN, "ignore_eos": True}
        s1, one = post(stack.agg.url + "/v1/completions", body)
        s2, two = post(stack.proxy, body)
        assert (s1, s2) == (200, 200), (length, one, two)
        assert two["disagg"]["transfer_ms"] > 0 and two["disagg"]["role"] == "decode"
        if one["choices"][0]["token_ids"] != two["choices"][0]["token_ids"]:
            mismatches.append((length, one["choices"][0], two["choices"][0]))
    assert not mismatches
    # every prefill hold was released by a READ's notification or a push's WRITE (each
    # decode served some), none by the lease
    _all_released(stack)
    done = {why: _released(stack, why) - before[why] for why in before}
    assert done["notified"] + done["pushed"] == n and min(done.values()) > 0, done
    assert _released(stack, "lease_expired") == 0


def test_disaggregated_equals_aggregated_for_50_prompts(cpu_stack: Stack) -> None:
    _check_invariant(cpu_stack, 50)


def test_concurrent_requests_stay_exact(cpu_stack: Stack) -> None:
    """Eight requests at once over a prefill and two decodes (least-loaded): each answer
    still equals its aggregated twin, and every held block set is released."""
    rng = random.Random(8)
    bodies = [
        {"prompt": _prompt(rng.randrange(1, 200), rng), "max_tokens": GEN, "ignore_eos": True}
        for _ in range(8)
    ]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda b: post(cpu_stack.proxy, b), bodies))
    for body, (status, out) in zip(bodies, together, strict=True):
        assert status == 200, out
        _, alone = post(cpu_stack.agg.url + "/v1/completions", body)
        assert out["choices"][0]["token_ids"] == alone["choices"][0]["token_ids"]
    assert {out["disagg"]["engine_id"] for _, out in together} == {
        d.name for d in cpu_stack.decodes
    }
    _all_released(cpu_stack)


def _demand(stack: Stack) -> dict[str, float]:
    """What the autoscaler reads (the engine seam's DemandSeries): prompt tokens computed
    by the prefills, prompt and output tokens of the decodes, requests in flight."""
    pages = {"p": [get(p.url + "/metrics") for p in stack.prefills]}
    pages["d"] = [get(d.url + "/metrics") for d in stack.decodes]
    return {
        f"{side}_{name}": sum(metric(page, f"disagg_{name}") for page in found)
        for side, found in pages.items()
        for name in ("prompt_tokens_total", "generation_tokens_total", "requests_running")
    }


def test_the_demand_series_count_what_each_role_computed(cpu_stack: Stack) -> None:
    rng = random.Random(5)
    before = _demand(cpu_stack)
    lengths = [3, 40, 150]
    for n in lengths:
        body = {"prompt": _prompt(n, rng), "max_tokens": GEN, "ignore_eos": True}
        assert post(cpu_stack.proxy, body)[0] == 200
    after = _demand(cpu_stack)
    grew = {k: after[k] - before[k] for k in after}
    assert grew["p_prompt_tokens_total"] == sum(lengths)  # prefill computed every prompt
    assert grew["d_prompt_tokens_total"] == 0  # decode read them: it computed none
    assert grew["d_generation_tokens_total"] == GEN * len(lengths)
    assert after["p_requests_running"] == after["d_requests_running"] == 0  # none in flight


def test_streamed_and_chat_answers_through_the_proxy_equal_aggregated(cpu_stack: Stack) -> None:
    """Through the real proxy: a streamed completion concatenates, token for token, to the
    aggregated worker's whole answer; a chat completion (whole and streamed) too."""
    rng = random.Random(9)
    body = {"prompt": _prompt(40, rng), "max_tokens": 9, "ignore_eos": True}
    _, alone = post(cpu_stack.agg.url + "/v1/completions", body)
    status, events, headers = stream(cpu_stack.proxy, {**body, "stream_options": {
        "include_usage": True}}, )  # fmt: skip
    assert status == 200 and events[-1] == "[DONE]", events
    assert events[-2]["usage"]["completion_tokens"] == 9
    chunks = [e["choices"][0] for e in events[:-2]]
    assert all(c["finish_reason"] is None for c in chunks[:-1])
    assert chunks[-1]["finish_reason"] == "length"
    assert [t for c in chunks for t in c["token_ids"] or []] == alone["choices"][0]["token_ids"]
    assert "".join(c["text"] for c in chunks) == alone["choices"][0]["text"]
    assert headers["X-Request-Id"].startswith("cmpl-")

    chat_url = cpu_stack.proxy.replace("/v1/completions", "/v1/chat/completions")
    chat = {"messages": [{"role": "user", "content": "hello"}], "max_completion_tokens": 6,
            "ignore_eos": True}  # fmt: skip
    _, agg = post(cpu_stack.agg.url + "/v1/chat/completions", chat)
    status, pd = post(chat_url, chat)
    assert status == 200 and pd["disagg"]["role"] == "decode"
    assert pd["choices"][0]["message"] == agg["choices"][0]["message"]
    status, events, _ = stream(chat_url, chat)
    deltas = [e["choices"][0]["delta"].get("content", "") for e in events[:-1]]
    assert status == 200 and "".join(deltas) == agg["choices"][0]["message"]["content"]
    _all_released(cpu_stack)


@pytest.mark.gpu
def test_disaggregated_equals_aggregated_on_cuda(tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    group = Workers(tmp_path)
    try:
        _check_invariant(_stack(group, "cuda"), 50)
    finally:
        group.stop()


def test_undelivered_blocks_are_freed_when_the_lease_expires(start_worker: StartWorker) -> None:
    pre = start_worker("prefill", block_lease_s=1.0, transfer_deadline_s=0.5, num_blocks=16)
    body = {"prompt": [BOS] * 40, "max_tokens": 8, "kv_transfer_params": {"do_remote_decode": True}}
    status, out = post(pre.url + "/v1/completions", body)
    assert status == 200
    params = out["kv_transfer_params"]
    assert params["do_remote_prefill"] is True and params["do_remote_decode"] is False
    assert len(params["remote_block_ids"]) == 3 and params["remote_engine_id"] == pre.name
    assert params["remote_model"] == "tiny/seed=0"
    assert (params["remote_host"], params["remote_port"]) == (
        "127.0.0.1",
        pre.ready["side_channel_port"],
    )
    assert len(out["choices"][0]["token_ids"]) == 1  # the first token, as vLLM returns it
    held = get(pre.url + "/debug/blocks")
    assert held["used"] == 3 and held["held"] == {params["remote_request_id"]: 3}
    wait_until(lambda: get(pre.url + "/debug/blocks")["used"] == 0, 20, "lease expiry")
    page = get(pre.url + "/metrics")
    assert metric(page, 'disagg_kv_block_releases_total{reason="lease_expired"}') == 1
    assert metric(page, "disagg_kv_blocks_held") == 0


def test_decode_refuses_params_that_do_not_fit_the_prompt(start_worker: StartWorker) -> None:
    dec = start_worker("decode", num_blocks=16)
    params = {
        "do_remote_prefill": True,
        "remote_engine_id": "p",
        "remote_block_ids": [0],
        "remote_host": "127.0.0.1",
        "remote_port": 1,
        "remote_request_id": "r",
    }
    body = {"prompt": [BOS] * 40, "kv_transfer_params": params}
    status, out = post(dec.url + "/v1/completions", body)
    assert status == 400
    assert out["error"]["param"] == "kv_transfer_params.remote_block_ids"
    assert "1 blocks for a 40-token prompt, expected 3" in out["error"]["message"]
    del params["remote_host"]
    status, out = post(dec.url + "/v1/completions", body)
    assert (status, out["error"]["param"]) == (400, "kv_transfer_params.remote_host")
    params["remote_model"] = "tiny/seed=7"
    status, out = post(dec.url + "/v1/completions", body)
    assert (status, out["error"]["param"]) == (400, "kv_transfer_params.remote_model")
    assert "the prefill ran 'tiny/seed=7', this decode runs tiny/seed=0" in out["error"]["message"]
    assert get(dec.url + "/debug/blocks")["used"] == 0


async def test_prefill_killed_between_hops_fails_naming_the_cause(
    start_worker: StartWorker,
) -> None:
    pre = start_worker("prefill", num_blocks=16)
    dec = start_worker("decode", num_blocks=16, transfer_deadline_s=3.0)

    async def kill_prefill(params: KvTransferParams) -> None:
        pre.proc.send_signal(signal.SIGKILL)
        pre.proc.wait()

    deadline_s = 20.0
    config = ProxyConfig(timeout_s=deadline_s)
    proxy = Proxy([pre.url], [dec.url], config, after_prefill=kill_prefill)
    server = TestServer(build_app(proxy), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            url = str(server.make_url("/v1/completions"))
            async with session.post(url, json={"prompt": "hello", "max_tokens": 4}) as resp:
                status, out = resp.status, await resp.json()
    finally:
        await server.close()
    message = out["error"]["message"]
    assert status in (502, 504), out
    # the error came from the decode (its own deadline or the dead peer), not from the
    # proxy's 20 s deadline, which would answer in its own words
    assert message.startswith(f"decode {dec.url}/v1/completions answered")
    assert f"KV transfer from prefill {pre.name} at 127.0.0.1:" in message
    # the decode worker is not stuck: its blocks are back and it still serves
    assert get(dec.url + "/debug/blocks")["used"] == 0
    assert get(dec.url + "/health")["status"] == "ok"


async def _through_proxy(proxy: Proxy, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    server = TestServer(build_app(proxy), host="127.0.0.1")
    await server.start_server()
    try:
        async with aiohttp.ClientSession() as session:
            url = str(server.make_url("/v1/completions"))
            async with session.post(url, json=body) as resp:
                return resp.status, await resp.json()
    finally:
        await server.close()


def _killer(pool: dict[str, Any], killed: list[str]) -> Any:
    """An after_prefill hook that SIGKILLs the prefill of the first request only."""

    async def kill(params: KvTransferParams) -> None:
        if not killed:
            victim = pool[params.remote_engine_id]
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait()
            killed.append(victim.name)

    return kill


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_prefill_killed_between_hops_is_retried_on_another_unseen_by_the_client(
    start_worker: StartWorker, streamed: bool
) -> None:
    """Two prefills; the one the proxy picked dies after answering: decode's READ fails
    (its prefill is gone, no token was made), the proxy runs the prefill hop again on the
    other prefill, and the client gets the aggregated answer, the retry counted."""
    agg = start_worker("both")
    pool = {n: start_worker("prefill", n) for n in ("p-first", "p-second")}
    dec = start_worker("decode", transfer_deadline_s=3.0)
    body = {"prompt": "retry me", "max_tokens": 5, "ignore_eos": True}
    _, alone = post(agg.url + "/v1/completions", body)
    killed: list[str] = []
    proxy = Proxy([w.url for w in pool.values()], [dec.url], ProxyConfig(timeout_s=20.0),
                  after_prefill=_killer(pool, killed))  # fmt: skip
    if not streamed:
        status, out = await _through_proxy(proxy, body)
        assert status == 200, out
        assert out["choices"][0]["token_ids"] == alone["choices"][0]["token_ids"]
        assert out["disagg"]["proxy"]["prefill_retries"] == 1
        assert out["disagg"]["kv_source"] == "transferred"
        (survivor,) = set(pool) - set(killed)
        assert out["disagg"]["prefill"]["engine_id"] == survivor
    else:
        server = TestServer(build_app(proxy), host="127.0.0.1")
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as session:
                url = str(server.make_url("/v1/completions"))
                async with session.post(url, json={**body, "stream": True}) as resp:
                    assert resp.status == 200
                    text = await resp.text()
        finally:
            await server.close()
        assert "error" not in text and text.rstrip().endswith("data: [DONE]")
    assert proxy.retried == 1 and len(killed) == 1
    assert get(dec.url + "/debug/blocks")["used"] == 0


async def test_without_retries_or_another_prefill_the_decode_error_reaches_the_client(
    start_worker: StartWorker,
) -> None:
    pool = {n: start_worker("prefill", n) for n in ("p-a", "p-b")}
    dec = start_worker("decode", transfer_deadline_s=3.0)
    body = {"prompt": "no retry", "max_tokens": 3}
    config = ProxyConfig(timeout_s=20.0, prefill_retries=0)
    proxy = Proxy([w.url for w in pool.values()], [dec.url], config,
                  after_prefill=_killer(pool, []))  # fmt: skip
    status, out = await _through_proxy(proxy, body)
    assert status == 502 and "KV transfer from prefill" in out["error"]["message"], out
    assert proxy.retried == 0
