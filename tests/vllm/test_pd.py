"""Real vLLM prefill → NIXL (cpu buffer) → real vLLM decode, from the operator's rendered
pods (examples/vllm-cpu.yaml) behind the disagg proxy, judged against aggregated vLLM.

The last test kills the prefill engine: keep it last in this file.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from disagg_tools.bench.relay import params_dropper
from disagg_tools.local.children import (
    disagg_argv,
    serve_in_thread,
    start_child,
    stop_children,
    wait_ready,
)
from disagg_tools.vllm.rules import judge
from disagg_worker.serve.canary import Canary
from disagg_worker.serve.canary_config import CanaryConfig
from disagg_worker.serve.pd.kv_transfer_params import PREFILL_PARAMS
from disagg_worker.serve.rules.canary_verdict import Result

from .conftest import (
    MAX_TOKENS,
    Logprobs,
    Stack,
    assert_pd_equals_aggregated,
    greedy,
    greedy_logprobs,
    post,
    prompts,
)

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


def test_pd_tokens_equal_aggregated_vllm(
    pd_stack: Stack, aggregated_tokens: list[list[int]]
) -> None:
    assert_pd_equals_aggregated(pd_stack, prompts(), aggregated_tokens, wait_s=30.0)


def test_pd_logprobs_equal_aggregated_and_the_judge_sees_wrong_kv(
    pd_stack: Stack, aggregated: list[tuple[list[int], Logprobs]]
) -> None:
    """Equal tokens can hide partly wrong KV with a model this degenerate (it repeats one
    token): the top-5 logprobs of every generated position must match aggregated vLLM's,
    and the judge must tell apart a prompt whose KV differs in one early position."""
    count = len(prompts())
    gaps, controls = [], []
    for n, prompt in enumerate(prompts()):
        tokens, tops = greedy_logprobs(pd_stack.proxy, prompt)
        want_tokens, want_tops = aggregated[n]
        assert tokens == want_tokens, f"prompt {n} ({len(prompt)} tokens) differs"
        gaps.append(judge.gap(tops, want_tops))
        controls.append(judge.gap(tops, aggregated[count + n][1]))
    print(f"logprob gaps P/D vs aggregated {gaps}; vs one early token changed {controls}")
    assert max(gaps) <= judge.TOLERANCE, gaps
    assert min(controls) > 5 * judge.TOLERANCE, controls


def _workers(pid: int) -> list[int]:
    """The ``VLLM::Worker`` processes below ``pid`` (vLLM's worker: the model's thread)."""
    out, todo = [], [pid]
    while todo:
        here = todo.pop()
        children = Path(f"/proc/{here}/task/{here}/children").read_text().split()
        for child in map(int, children):
            if Path(f"/proc/{child}/comm").read_text().strip() == "VLLM::Worker":
                out.append(child)
            todo.append(child)
    return out


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core per engine")
def test_each_engine_computes_on_its_own_core_despite_vllm_s_nixl_pin(pd_stack: Stack) -> None:
    """vLLM's NIXL worker pins its main thread (the model's) to the host's highest core;
    the engine-idle module gives it back the core `disagg up` bound the engine to, so the
    prefill does not compute on decode's core (docs/derivation.md, "The NIXL worker pin")."""
    cores = {}
    for child in pd_stack.run.children:
        bind = child.env.get("VLLM_CPU_OMP_THREADS_BIND")
        if bind is None or child.env.get("DISAGG_VLLM_KEEP_CPU_AFFINITY") != "1":
            continue
        (worker,) = _workers(child.proc.pid)
        cores[child.name] = (bind, sorted(os.sched_getaffinity(worker)))
    assert len(cores) == 2, cores  # both engines, the lever rendered on both
    for bind, got in cores.values():
        want = []
        for part in bind.split(","):
            low, _, high = part.partition("-")
            want += range(int(low), int(high or low) + 1)
        assert got == want, cores
    assert len({tuple(got) for _, got in cores.values()}) == 2, cores


def test_stream_through_the_proxy_equals_the_whole_answer(pd_stack: Stack) -> None:
    prompt = [0] + [5 + (i * 13) % 1000 for i in range(57)]
    whole = greedy(pd_stack.proxy, prompt)
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": True}
    body["return_token_ids"] = True
    req = urllib.request.Request(
        pd_stack.proxy + "/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    streamed: list[int] = []
    chunks = 0
    with urllib.request.urlopen(req, timeout=300) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                choice = json.loads(line[6:])["choices"]
                if choice:
                    streamed += choice[0].get("token_ids") or []
                    chunks += 1
    assert streamed == whole
    assert chunks > 1


def test_chat_through_the_proxy(pd_stack: Stack) -> None:
    body = {
        "messages": [{"role": "user", "content": "Where do rivers flow?"}],
        "max_tokens": 8,
        "temperature": 0,
    }
    out = post(pd_stack.proxy + "/v1/chat/completions", body)
    message = out["choices"][0]["message"]
    assert message["role"] == "assistant" and isinstance(message["content"], str)
    assert out["usage"]["completion_tokens"] == 8


def test_unknown_route_is_a_json_404(pd_stack: Stack) -> None:
    with pytest.raises(urllib.error.HTTPError) as e:
        post(pd_stack.proxy + "/v1/nothing", {})
    assert e.value.code == 404
    assert "error" in json.load(e.value)


def test_the_autoscalers_demand_series_are_vllms_own(pd_stack: Stack) -> None:
    """The series the engine seam names for vLLM (Vllm.demand) are on a running engine's
    /metrics: prompt tokens counted where they were computed (prefill), output tokens
    where they were generated (decode), and the running and waiting gauges on both."""
    from prometheus_client.parser import text_string_to_metric_families

    from disagg_operator.engines.vllm.engine import Vllm

    post(pd_stack.proxy + "/v1/completions", {"prompt": "Hello there", "max_tokens": 4})
    names = Vllm.demand
    seen: dict[str, dict[str, float]] = {}
    for role in ("prefill", "decode"):
        with urllib.request.urlopen(pd_stack.url(role) + "/metrics", timeout=10) as resp:
            page = resp.read().decode()
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(page):
            for sample in family.samples:
                values[sample.name] = values.get(sample.name, 0.0) + sample.value
        seen[role] = values
    for role in seen:
        for name in (names.prompt_tokens, names.output_tokens, names.running, names.waiting):
            assert name in seen[role], (role, name)
    assert seen["prefill"][names.prompt_tokens] > 0
    assert seen["prefill"][names.requests] > 0 and seen["decode"][names.requests] > 0
    assert seen["decode"][names.output_tokens] >= 4


@pytest.fixture
def threshold_router(pd_stack: Stack, tmp_path: Path) -> Iterator[str]:
    """A second router over the same vLLM pair with the threshold policy and vLLM's prefix
    cache (examples/vllm-cpu.yaml sets no block size: vLLM's CPU default, 128)."""
    argv = disagg_argv(
        "proxy", "--port", "0", "--prefill", pd_stack.url("prefill"),
        "--decode", pd_stack.url("decode"), "--disaggregate", "threshold",
        "--threshold-tokens", "150", "--decode-prefix-cache", "--block-tokens", "128",
    )  # fmt: skip
    child = start_child("threshold-router", argv, dict(os.environ), tmp_path)
    try:
        yield f"http://127.0.0.1:{wait_ready(child, timeout_s=60)['http_port']}"
    finally:
        stop_children([child])


def _routed(url: str, body: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    out = post(url + "/v1/completions", {**body, "temperature": 0, "return_token_ids": True})
    return out["choices"][0]["token_ids"], out


def test_the_threshold_router_counts_with_vllms_tokenizer_and_prefix_cache(
    pd_stack: Stack, threshold_router: str
) -> None:
    """Real vLLM behind the threshold policy: text counted by vLLM's /tokenize, a short
    prompt on decode alone, a long one through prefill, the same long one again on decode
    alone (two of its 128-token blocks held there), tokens equal to the always-P/D
    router's every time."""
    text = {"prompt": "rivers flow to the sea " * 4, "max_tokens": 4}
    got, out = _routed(threshold_router, text)
    assert out["disagg"]["proxy"]["path"] == "decode"
    assert out["disagg"]["proxy"]["prompt_tokens"] == out["usage"]["prompt_tokens"]
    assert got == _routed(pd_stack.proxy, text)[0]
    long = {"prompt": [0] + [11 + (i * 37) % 900 for i in range(299)], "max_tokens": 4}
    want = _routed(pd_stack.proxy, long)[0]
    for path, cached in (("pd", 0), ("decode", 256)):
        got, out = _routed(threshold_router, long)
        figures = out["disagg"]["proxy"]
        assert (figures["path"], figures["cached_tokens"], got) == (path, cached, want)
    with urllib.request.urlopen(threshold_router + "/metrics", timeout=10) as resp:
        page = resp.read().decode()
    assert 'disagg_proxy_requests_total{path="decode",reason="below_threshold"} 2.0' in page
    assert 'disagg_proxy_requests_total{path="pd",reason="above_threshold"} 1.0' in page


def _fallbacks(url: str) -> float:
    """The router's requests whose decode estimate fell back to its approximate index."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        page = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in page.splitlines()
        if line.startswith("disagg_proxy_prefix_index_fallback_total{")
    )


def test_the_router_counts_what_decode_holds_from_decodes_own_kv_events(
    pd_stack: Stack,
) -> None:
    """``prefixIndex: events`` as `disagg up` runs it: each engine publishes at its own
    address (the rendered ``tcp://*:5557``), and the router reads what decode holds from
    decode's stream: a prompt sent again finds its two 128-token blocks held, and no request
    falls back to the approximate index (which would give the same count)."""
    long = {"prompt": [0] + [13 + (i * 41) % 900 for i in range(299)], "max_tokens": 4}
    _routed(pd_stack.proxy, long)
    before = _fallbacks(pd_stack.proxy)
    deadline = time.monotonic() + 30
    while True:  # the events reach the router after the answer: until they are in
        _, out = _routed(pd_stack.proxy, long)
        if out["disagg"]["proxy"]["cached_tokens"] == 256 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert out["disagg"]["proxy"]["cached_tokens"] == 256, out["disagg"]["proxy"]
    assert _fallbacks(pd_stack.proxy) == before


def _status(url: str, body: dict[str, Any], timeout: float) -> tuple[int, float]:
    t0 = time.monotonic()
    try:
        post(url, body, timeout=timeout)
        return 200, time.monotonic() - t0
    except urllib.error.HTTPError as e:
        return e.code, time.monotonic() - t0


async def _canary(prefill: str, decode: str) -> str | None:
    config = CanaryConfig(prefill, decode, "tiny-llama", timeout_s=60, interval_s=1, fresh_s=60)
    canary = Canary(config)
    await canary.start()
    try:
        await canary.once()  # the warm-up, then the canary
        return (await canary.once()).problem
    finally:
        await canary.close()


def test_the_canary_sees_a_vllm_decode_that_recomputed(pd_stack: Stack) -> None:
    """vLLM's answer does not say where its KV came from; its prompt-token sources do."""
    prefill, decode = pd_stack.url("prefill"), pd_stack.url("decode")
    assert asyncio.run(_canary(prefill, decode)) is None
    with serve_in_thread(params_dropper(decode)) as relay:
        problem = asyncio.run(_canary(prefill, relay))
    assert problem is not None and problem.startswith("DecodeRecomputing"), problem


# The canary names the wire beside vLLM's own figures: vLLM's NIXL agent cannot be asked
# which transport UCX chose for it; the canary's wire probe (our agents, the same UCX
# settings) says it, and vLLM's ``vllm:nixl_*`` sums around the canary's request give the
# KV's bytes and seconds, the cross-check. Here the engines and the wire peer are
# processes of one host: UCX sees the peer intra-node and reads through shared memory
# (CMA), as expected there. (In this module: it shares the P/D pair's engines.)


@pytest.fixture
def wire_peer(pd_stack: Stack) -> Iterator[int]:
    """A `disagg worker wire peer` at the prefill pod's address (where the canary looks for
    the prefill pool's wire peers); its port."""
    host = urlsplit(pd_stack.url("prefill")).hostname or ""
    argv = [sys.executable, "-m", "disagg_worker.transfer.wire", "peer", "--host", host]
    proc = subprocess.Popen([*argv, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{") and json.loads(line).get("event") == "ready":
                yield int(json.loads(line)["http_port"])
                break
        else:
            raise AssertionError(f"the wire peer exited {proc.wait()} before it was ready")
    finally:
        proc.kill()
        proc.wait()


async def _wired_canary(prefill: str, decode: str, port: int) -> Result:
    config = CanaryConfig(
        prefill, decode, "tiny-llama", timeout_s=60, interval_s=1, fresh_s=60,
        wire_peer_port=port, expect_wire={"intra-node": ("shared-memory",)},
    )  # fmt: skip
    canary = Canary(config)
    await canary.start()
    try:
        await canary.once()  # the warm-up, then the canary
        result = await canary.once()
        await canary.probe_wire()
        return canary.wired(result)
    finally:
        await canary.close()


def test_the_canary_names_the_wire_beside_vllms_kv_figures(pd_stack: Stack, wire_peer: int) -> None:
    result = asyncio.run(_wired_canary(pd_stack.url("prefill"), pd_stack.url("decode"), wire_peer))
    assert result.passed, result.problem
    assert result.wire is not None and result.odd is None, result
    assert (result.wire.scope, result.wire.wire) == ("intra-node", "shared-memory")
    assert result.wire.chose.startswith("cma/")
    # vLLM's own figures for the canary's KV: the growth of its NIXL sums
    assert result.transfer is not None and result.transfer.via == "metrics", result
    assert result.transfer.nbytes > 0 and result.transfer.seconds > 0


def test_prefill_killed_between_the_hops_fails_fast_and_decode_survives(
    pd_stack: Stack,
) -> None:
    prompt = [0] + [9 + (i * 29) % 1000 for i in range(99)]
    hop = {"prompt": prompt, "max_tokens": 1, "temperature": 0,
           "kv_transfer_params": PREFILL_PARAMS.to_wire()}  # fmt: skip
    first = post(pd_stack.url("prefill") + "/v1/completions", hop)
    params = first["kv_transfer_params"]
    assert params["remote_block_ids"], first
    prefill = next(c for c in pd_stack.run.children if c.name.startswith("vllm-cpu-prefill"))
    os.killpg(prefill.proc.pid, signal.SIGKILL)
    prefill.proc.wait(30)
    body = {"prompt": prompt, "max_tokens": 4, "temperature": 0, "kv_transfer_params": params}
    status, took = _status(pd_stack.url("decode") + "/v1/completions", body, timeout=60)
    # kv_load_failure_policy fail (vLLM's default since 0.17): an error, quickly.
    assert status >= 500, "decode answered a request whose KV it could not read"
    assert took < 15.0
    healthy, _ = _status(pd_stack.url("decode") + "/v1/completions", {"prompt": [0, 5, 6]}, 60)
    assert healthy == 200
