"""The canary over data-parallel engines: one P/D request per engine pair, each hop told
its engine, every prefill engine's side channel named, a report per rank.

The stand-ins are vLLM's API server in front of N engines as vLLM 0.32.0 runs them: a
request goes to the engine its ``X-data-parallel-rank`` header names (else to the least
loaded one: here engine 0, what a fresh server picks), a rank outside [0, N) is refused
with 400 (v1/engine/input_processor.py), and a prefill engine d answers kv_transfer_params
naming ``VLLM_NIXL_SIDE_CHANNEL_PORT + d`` (nixl/base_scheduler.py ``side_channel_port``).
A decode answers a token only for kv_transfer_params a prefill handed out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_contract.pd import DP_RANK_HEADER
from disagg_worker.serve.canary import Canary, metrics_text, parser
from disagg_worker.serve.canary_config import CanaryConfig, from_args
from disagg_worker.serve.rules.canary_verdict import Rank, rank_pairs, ranks_problem

BASE = 5600


class Engines:
    """vLLM's API server over ``size`` data-parallel engines; ``served`` the engine each
    completion went to, ``honour`` False for a server that ignores the header (one that
    predates it)."""

    def __init__(self, role: str, size: int, honour: bool = True) -> None:
        self.role, self.size, self.honour = role, size, honour
        self.served: list[int] = []
        self.handed: set[tuple[str, int]] = set()  # (host, port) of params handed out

    def engine(self, request: web.Request) -> int:
        given = request.headers.get(DP_RANK_HEADER)
        if given is None or not self.honour:
            return 0
        rank = int(given)
        if not 0 <= rank < self.size:
            raise web.HTTPBadRequest(
                text=json.dumps(
                    {"error": {"message": f"data_parallel_rank {rank} is out of range"}}
                ),
                content_type="application/json",
            )
        return rank

    def app(self, prefill: Engines | None = None) -> web.Application:
        async def complete(request: web.Request) -> web.Response:
            rank, body = self.engine(request), await request.json()
            self.served.append(rank)
            params = body.get("kv_transfer_params") or {}
            answer: dict[str, Any] = {"choices": [{"text": " x", "index": 0}]}
            answer["usage"] = {"completion_tokens": 1}
            if self.role == "prefill":
                port = BASE + rank
                self.handed.add(("127.0.0.1", port))
                answer["kv_transfer_params"] = {
                    "do_remote_prefill": True, "do_remote_decode": False,
                    "remote_engine_id": f"prefill-dp{rank}", "remote_block_ids": [1],
                    "remote_host": "127.0.0.1", "remote_port": port,
                }  # fmt: skip
            elif params.get("do_remote_prefill") and prefill is not None:
                named = (params.get("remote_host"), params.get("remote_port"))
                if named not in prefill.handed:
                    raise web.HTTPInternalServerError(text="no such prefill side channel")
            return web.json_response(answer)

        async def health(_: web.Request) -> web.Response:
            return web.Response(text="")

        async def metrics(_: web.Request) -> web.Response:
            return web.Response(text="process_start_time_seconds 1.0\n")

        app = web.Application()
        app.router.add_post("/v1/completions", complete)
        app.router.add_get("/health", health)
        app.router.add_get("/metrics", metrics)
        return app


@pytest.fixture
async def servers() -> AsyncIterator[list[TestServer]]:
    started: list[TestServer] = []
    yield started
    for server in started:
        await server.close()


async def _canary(
    servers: list[TestServer], prefill: Engines, decode: Engines, **ranks: int
) -> Canary:
    urls = []
    for app in (prefill.app(), decode.app(prefill)):
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        urls.append(str(server.make_url("")).rstrip("/"))
    config = CanaryConfig(urls[0], urls[1], "tiny", 5.0, 1.0, 30.0, **ranks)
    canary = Canary(config)
    await canary.start()
    return canary


async def test_every_engine_pair_is_proven_and_reported(servers: list[TestServer]) -> None:
    prefill, decode = Engines("prefill", 2), Engines("decode", 3)
    canary = await _canary(servers, prefill, decode, prefill_ranks=2, decode_ranks=3)
    try:
        result = await canary.once()
    finally:
        await canary.close()
    assert result.passed, result.problem
    assert [(r.prefill, r.decode, r.side_channel) for r in result.ranks] == [
        (0, 0, f"127.0.0.1:{BASE}"),
        (1, 1, f"127.0.0.1:{BASE + 1}"),
        (0, 2, f"127.0.0.1:{BASE}"),
    ]
    assert sorted(prefill.served) == [0, 0, 1]  # each prefill engine served a hop
    assert sorted(set(decode.served)) == [0, 1, 2]  # each decode engine: a warm-up, a P/D
    canary.last = result  # what a run keeps
    text = metrics_text(canary)
    assert 'disagg_canary_rank_passing{prefill_rank="1",decode_rank="1"} 1' in text


async def test_a_server_that_ignores_the_rank_fails_the_canary(servers: list[TestServer]) -> None:
    """A prefill whose engines all answer for engine 0 (no header): its second side channel
    is never reached, so the canary says so instead of passing on engine 0 twice."""
    prefill, decode = Engines("prefill", 2, honour=False), Engines("decode", 2)
    canary = await _canary(servers, prefill, decode, prefill_ranks=2, decode_ranks=2)
    try:
        result = await canary.once()
    finally:
        await canary.close()
    assert not result.passed and result.problem is not None
    assert "prefill ranks 0 and 1 both named side channel" in result.problem


async def test_a_rank_the_pod_does_not_run_fails_at_that_pair(servers: list[TestServer]) -> None:
    prefill, decode = Engines("prefill", 1), Engines("decode", 2)
    canary = await _canary(servers, prefill, decode, prefill_ranks=2, decode_ranks=2)
    try:
        result = await canary.once()
    finally:
        await canary.close()
    assert [r.problem is None for r in result.ranks] == [True, False]
    assert result.problem is not None and result.problem.startswith(
        "prefill rank 1 to decode rank 1"
    )
    assert "400" in result.problem


async def test_one_engine_a_pod_sends_no_rank(servers: list[TestServer]) -> None:
    prefill, decode = Engines("prefill", 1), Engines("decode", 1)
    canary = await _canary(servers, prefill, decode)
    original = Engines.engine

    def strict(self: Engines, request: web.Request) -> int:
        assert DP_RANK_HEADER not in request.headers
        return original(self, request)

    Engines.engine = strict  # type: ignore[method-assign]
    try:
        result = await canary.once()
    finally:
        Engines.engine = original  # type: ignore[method-assign]
        await canary.close()
    assert result.passed and result.ranks == ()


@pytest.mark.parametrize(
    ("prefill", "decode", "pairs"),
    [
        (1, 1, [(0, 0)]),
        (2, 2, [(0, 0), (1, 1)]),
        (1, 3, [(0, 0), (0, 1), (0, 2)]),
        (4, 2, [(0, 0), (1, 1), (2, 0), (3, 1)]),
    ],
)
def test_rank_pairs_cover_every_engine_of_both_pods(
    prefill: int, decode: int, pairs: list[tuple[int, int]]
) -> None:
    assert rank_pairs(prefill, decode) == pairs


def test_ranks_problem_leads_with_the_pair() -> None:
    ok = Rank(0, 0, "h:5600")
    assert ranks_problem([ok, Rank(1, 1, "h:5601")]) is None
    assert ranks_problem([ok, Rank(1, 0, None, "decode x: 500")]) == (
        "prefill rank 1 to decode rank 0: decode x: 500"
    )


def test_the_command_line_takes_ranks() -> None:
    base = ["--prefill", "http://p:8000", "--decode", "http://127.0.0.1:8000", "--model", "m"]
    config = from_args(parser().parse_args([*base, "--prefill-ranks", "2", "--decode-ranks", "3"]))
    assert (config.prefill_ranks, config.decode_ranks) == (2, 3)
    assert from_args(parser().parse_args(base)).decode_ranks == 1
    with pytest.raises(SystemExit):
        parser().parse_args([*base, "--decode-ranks", "0"])
