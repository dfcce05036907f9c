"""`disagg worker canary`: prove that this decode pod can pull KV from the prefill pool
through the engine's own HTTP API, and keep saying whether it still can. The proof is made
once per engine instance, behind a readiness probe; what it says after is apart from
readiness.

I/O layer (aiohttp server; the hops go through the P/D proxy's own client,
:class:`~disagg_worker.serve.proxy.flow.Proxy`). Readiness latches because one that
followed the prefill pool would drop every decode pod from its Service whenever prefill is
busy: a total outage. Routes, reasons, warm-up and bandwidth: docs/worker.md (the canary).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from functools import partial
from typing import Any

from aiohttp import web

from disagg_contract import commandline
from disagg_contract.canary import parse_expect_wire
from disagg_worker.serve import pd
from disagg_worker.serve.canary_config import CanaryConfig, from_args
from disagg_worker.serve.pd.base import Page
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.upstream import HopError
from disagg_worker.serve.rules.canary_verdict import (
    Latch,
    Rank,
    Result,
    Transfer,
    Verdict,
    bandwidth_problem,
    due,
    engine_identity,
    flipped,
    hop_problem,
    kv_fields,
    kv_problem,
    measured,
    rank_fields,
    rank_pairs,
    ranks_problem,
    request_body,
    slowest,
    token_problem,
    verdict,
)
from disagg_worker.serve.rules.canary_wire import Wire, transport_problem, wire_fields, wire_from

DEFAULT_PORT = 8090
PATH = "/v1/completions"
METRICS_TIMEOUT_S = 2.0


class Canary:
    """The last canary's result and the one running now."""

    def __init__(
        self, config: CanaryConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.clock = clock
        self.proxy = Proxy(
            [config.prefill], [config.decode], config.proxy(), after_prefill=self._handed
        )
        self._handoff: Any = None  # the last prefill hop's, for the side channel it names
        self.last: Result | None = None
        self.warmed: set[int] = set()  # decode engines (of the instance now answering)
        # that served one plain completion
        self.latch = Latch()
        self.wire: Wire | None = None  # the last wire probe's finding
        self._wire_at: float | None = None  # when the last wire probe ran
        self._running: asyncio.Future[Result] | None = None
        self._wiring: asyncio.Future[None] | None = None  # the wire probe running now

    async def start(self, _: web.Application | None = None) -> None:
        await self.proxy.start()

    async def close(self, _: web.Application | None = None) -> None:
        if self._wiring is not None:
            self._wiring.cancel()  # its process is killed on the way out
        await self.proxy.close()

    def kick(self) -> None:
        """Start a canary when one is due and none runs."""
        if self._running is None and due(self.last, self.clock(), self.config.interval_s):
            self._running = asyncio.ensure_future(self._run())

    async def check(self) -> Result:
        """The last result, after running a canary first when one is due."""
        self.kick()
        if self._running is not None:
            # shielded: a probe that gives up must not cancel the run other probes share
            return await asyncio.shield(self._running)
        assert self.last is not None  # not due means there is a last result
        return self.last

    def now(self) -> Verdict:
        """The path now (``/verdict``), from the last canary."""
        return verdict(self.last, self.clock(), self.config.fresh_s)

    async def ready(self) -> tuple[bool, str]:
        """The readiness probe's answer: latched on the first canary that passes on the
        engine instance answering now (:class:`Latch`), re-gated when it changes."""
        identity, answers = await self.engine()
        if self.latch.seen(identity, answers):
            self.warmed, self.last = set(), None  # a new engine: warm it, prove it again
            self._wire_at = None  # and probe its wire again
            _log({"event": "engine_changed", "decode": self.config.decode, "engine": identity})
        if self.latch.ready:
            self.kick()  # keep the verdict current; the probe does not wait for it
            return True, f"a canary passed on this engine ({identity or 'no identity'})"
        if not answers:
            return False, f"the decode engine {self.config.decode} does not answer /health"
        found = verdict(await self.check(), self.clock(), self.config.fresh_s)
        if found.ready:
            self.latch.passed(identity)
        return self.latch.ready, found.reason

    async def engine(self) -> tuple[str | None, bool]:
        """(identity, answers) of the engine instance behind ``--decode``
        (:func:`engine_identity`; vLLM's /health has an empty body, its /metrics tell)."""
        try:
            text = await self.proxy.http.text(self.config.decode + "/health", METRICS_TIMEOUT_S)
        except HopError:
            return None, False
        try:
            identity = engine_identity(json.loads(text))
        except ValueError:
            identity = None
        if identity is None:
            try:
                url = self.config.decode + "/metrics"
                metrics = await self.proxy.http.text(url, METRICS_TIMEOUT_S)
            except HopError:
                metrics = ""
            identity = engine_identity(None, metrics)
        return identity, True

    async def _run(self) -> Result:
        try:
            result = self.wired(await self.once())
            if flipped(self.last, result):
                _log_flip(self, result)
            self.last = result
            if result.passed:
                self.kick_wire()
            return result
        finally:
            self._running = None

    async def once(self) -> Result:
        """One canary: prefill then decode, both bounded by one ``timeout_s`` deadline; over
        data-parallel engines, one such request per engine pair (:meth:`_ranks`)."""
        if (self.config.prefill_ranks, self.config.decode_ranks) != (1, 1):
            return await self._ranks()
        t0 = self.clock()
        moved: Transfer | None = None
        slow: str | None = None
        problem = await self._warm(0, {})
        if problem is None:
            problem, moved = await self._step(partial(self._pd, hops={}), "canary")
            slow = None if problem else bandwidth_problem(moved, self.config.min_gbps)
        now = self.clock()
        return Result(now, (now - t0) * 1e3, problem, moved, slow)

    async def _ranks(self) -> Result:
        """One P/D request per (prefill engine, decode engine) pair (:func:`rank_pairs`),
        each hop sent to its engine (the protocol's ``engine_rank``); it fails at the first
        pair that fails, or when two prefill engines name one side channel."""
        t0 = self.clock()
        ranks: list[Rank] = []
        for p, d in rank_pairs(self.config.prefill_ranks, self.config.decode_ranks):
            hops = {"prefill": self._rank(p), "decode": self._rank(d)}
            self._handoff, moved = None, None
            problem = await self._warm(d, {"decode": hops["decode"]})
            if problem is None:
                problem, moved = await self._step(partial(self._pd, hops=hops), "canary")
            handoff = self._handoff
            channel = None if handoff is None else self.config.protocol.side_channel(handoff)
            ranks.append(Rank(p, d, channel, problem, moved))
            if problem is not None:
                break
        problem, moved = ranks_problem(ranks), slowest(ranks)
        slow = None if problem else bandwidth_problem(moved, self.config.min_gbps)
        now = self.clock()
        return Result(now, (now - t0) * 1e3, problem, moved, slow, tuple(ranks))

    def wired(self, result: Result) -> Result:
        """``result`` with the last wire probe's finding and whether it is expected, when
        the canary passed (a failed one says nothing of the wire)."""
        if not result.passed or self.wire is None:
            return result
        odd = transport_problem(self.wire, self.config.expect_wire)
        return replace(result, wire=self.wire, odd=odd)

    def kick_wire(self) -> None:
        """Start a wire probe (:meth:`probe_wire`) apart from the canaries, so that it
        never delays a verdict or a readiness answer; its finding joins the last result
        when it lands and every later one."""
        if self._wiring is None and self.config.wire_peer() is not None:
            self._wiring = asyncio.ensure_future(self._probe_and_note())

    async def _probe_and_note(self) -> None:
        try:
            await self.probe_wire()
            if self.last is not None:
                self.last = self.wired(self.last)
        finally:
            self._wiring = None

    async def probe_wire(self) -> Wire | None:
        """The wire UCX chooses between this pod and a prefill pod with this pod's UCX
        settings: a ``disagg worker wire probe`` process (it imports NIXL, the canary does
        not), at most once per ``wire_interval_s``; between probes, the last finding."""
        url, now = self.config.wire_peer(), self.clock()
        if url is None:
            return None
        if self._wire_at is not None and now - self._wire_at < self.config.wire_interval_s:
            return self.wire
        self._wire_at = now
        found = await _wire_probe(url, self.config.timeout_s)
        self.wire = wire_from(found)
        if self.wire is None:
            _log({"event": "wire_probe", "peer": url, **found})
        return self.wire

    def _rank(self, rank: int) -> dict[str, str]:
        """The headers that send a hop to engine ``rank`` (a protocol that cannot tell an
        engine is refused at the command line)."""
        headers = self.config.protocol.engine_rank(rank)
        assert headers is not None, "main refuses ranks its protocol cannot steer"
        return headers

    async def _warm(self, rank: int, hops: dict[str, dict[str, str]]) -> str | None:
        """Before the first canary on decode engine ``rank`` of this engine instance: one
        plain completion on it; what failed, else None."""
        if rank in self.warmed:
            return None

        async def warm(headers: dict[str, str]) -> tuple[str | None, Transfer | None]:
            answer = await asyncio.wait_for(
                self.proxy.aggregated(PATH, request_body(self.config.model), headers, hops),
                self.config.timeout_s + 1.0,
            )
            problem = token_problem(answer)
            if problem is not None:
                raise HopError(502, f"decode {self.config.decode}: {problem}")
            return None, None

        problem, _ = await self._step(warm, "warm-up completion")
        if problem is None:
            self.warmed.add(rank)
        return problem

    async def _step(
        self,
        run: Callable[[dict[str, str]], Awaitable[tuple[str | None, Transfer | None]]],
        stage: str,
    ) -> tuple[str | None, Transfer | None]:
        """``run`` with a request id of its own; a failed hop or the deadline read as the
        problem of ``stage`` (a warm-up's in its own words, the canary's by
        :func:`hop_problem`)."""
        headers = {"X-Request-Id": f"canary-{uuid.uuid4().hex}"}
        try:
            return await run(headers)
        except HopError as e:
            return (hop_problem(e.status, str(e)) if stage == "canary" else f"{stage}: {e}"), None
        except asyncio.TimeoutError:
            return f"{stage}: no answer within the {self.config.timeout_s:g}s deadline", None

    async def _handed(self, handoff: Any) -> None:
        self._handoff = handoff

    async def _pd(
        self, headers: dict[str, str], hops: dict[str, dict[str, str]]
    ) -> tuple[str | None, Transfer | None]:
        """The canary's P/D request: what is wrong with its answer (None: nothing) and the
        KV its decode read (None: no figure)."""
        before = await self._page()
        # the proxy's deadline bounds each hop; this bounds anything around them too
        answer = await asyncio.wait_for(
            self.proxy.complete(PATH, request_body(self.config.model), headers, hops),
            self.config.timeout_s + 1.0,
        )
        # a page the protocol reads nothing of (the reference worker's) is not read twice
        after = await self._page() if before else {}
        protocol = self.proxy.config.protocol
        moved = measured(answer, before, after, protocol)
        return token_problem(answer) or kv_problem(answer, before, after, protocol), moved

    async def _page(self) -> Page:
        """What the protocol reads of the engine's /metrics (vLLM's prompt-token sources
        and NIXL transfer sums; empty for an engine that exports none, or when the page
        cannot be read: no evidence, no verdict)."""
        try:
            text = await self.proxy.http.text(self.config.decode + "/metrics", METRICS_TIMEOUT_S)
        except HopError:
            return {}
        return self.proxy.config.protocol.page(text)

    def kv_fields(self, result: Result | None) -> dict[str, Any]:
        """``result``'s KV figures (none yet: None) and how they compare with the floor."""
        return kv_fields(result.transfer if result else None, self.config.min_gbps)


async def _wire_probe(url: str, timeout_s: float) -> dict[str, Any]:
    """What ``disagg worker wire probe --peer url`` printed (its JSON line), or why not."""
    argv = ["-m", "disagg_worker.transfer.wire", "probe", "--peer", url]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, "--timeout-s", f"{timeout_s:g}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        # its own deadline bounds the READ; this bounds NIXL's start and a hang
        out, err = await asyncio.wait_for(proc.communicate(), 2 * timeout_s + 10)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        return {"ok": False, "error": f"the wire probe gave no answer in {2 * timeout_s + 10:g} s"}
    except asyncio.CancelledError:
        proc.kill()
        raise
    lines = [x for x in out.decode(errors="replace").splitlines() if x.startswith("{")]
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        return {"ok": False, "error": f"the wire probe exited {proc.returncode}: {tail}"}
    return found


def _log(line: dict[str, Any]) -> None:
    print(json.dumps(line), file=sys.stderr, flush=True)


def _log_flip(canary: Canary, result: Result) -> None:
    _log(
        {
            "event": "transfer_path",
            "ready": result.passed,
            "prefill": canary.config.prefill,
            "decode": canary.config.decode,
            "took_ms": round(result.took_ms, 1),
            "problem": result.problem,
            "transport": result.notes,
            "wire": result.wire.chose if result.wire else None,
            "kv_gbytes_per_second": canary.kv_fields(result)["kv_gbytes_per_second"],
        }
    )


def _body(canary: Canary) -> dict[str, Any]:
    """What both pages say besides their answer: the latch, the path now, the KV figures."""
    found = canary.now()
    return {
        "passing": found.ready,
        "verdict": found.reason,
        "latched": canary.latch.ready,
        "engine": canary.latch.engine,
        "prefill": canary.config.prefill,
        "decode": canary.config.decode,
        **canary.kv_fields(canary.last),
        **_ranks(canary.last),
        **wire_fields(canary.last.wire if canary.last else None, canary.config.expect_wire),
    }


def _ranks(result: Result | None) -> dict[str, Any]:
    """Each engine pair's request of ``result`` (``ranks``), where its pods run
    data-parallel engines."""
    return {"ranks": rank_fields(result.ranks)} if result and result.ranks else {}


def metrics_text(canary: Canary) -> str:
    """The canary's gauges in the Prometheus text format: the path now, the latch, the last
    canary's duration and KV bandwidth (absent until measured)."""
    last, kv = canary.last, canary.kv_fields(canary.last)["kv_gbytes_per_second"]
    rows = [
        (
            "disagg_canary_passing",
            "1 while the last canary passed and is fresh",
            canary.now().ready,
        ),
        ("disagg_canary_ready", "1 while readiness is latched on this engine", canary.latch.ready),
        (
            "disagg_canary_duration_seconds",
            "the last canary's duration",
            last and last.took_ms / 1e3,
        ),
        ("disagg_canary_kv_gbytes_per_second", "the last canary's KV bandwidth (1e9 B/s)", kv),
    ]
    lines: list[str] = []
    for name, help_text, value in rows:
        if value is None:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {float(value):g}"]
    if last is not None and last.ranks:
        name = "disagg_canary_rank_passing"
        lines += [f"# HELP {name} 1 when the last canary's request to this engine pair passed"]
        lines.append(f"# TYPE {name} gauge")
        for r in last.ranks:
            labels = f'prefill_rank="{r.prefill}",decode_rank="{r.decode}"'
            lines.append(f"{name}{{{labels}}} {int(r.problem is None)}")
    return "\n".join(lines) + "\n"


def build_app(canary: Canary) -> web.Application:
    """GET /ready (the latched readiness), GET /verdict (the path now), both 200 or 503
    with JSON {ready, reason, passing, verdict, latched, engine, prefill, decode} and the
    last canary's KV figures (:func:`~disagg_worker.serve.rules.canary_verdict.kv_fields`);
    GET /metrics (the same as gauges)."""

    async def ready(_: web.Request) -> web.Response:
        is_ready, reason = await canary.ready()
        body = {"ready": is_ready, "reason": reason, **_body(canary)}
        return web.json_response(body, status=200 if is_ready else 503)

    async def now(_: web.Request) -> web.Response:
        canary.kick()
        found = canary.now()
        body = {"ready": found.ready, "reason": found.reason, **_body(canary)}
        return web.json_response(body, status=200 if found.ready else 503)

    async def metrics(_: web.Request) -> web.Response:
        canary.kick()
        return web.Response(text=metrics_text(canary), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/ready", ready)
    app.router.add_get("/verdict", now)
    app.router.add_get("/metrics", metrics)
    app.on_startup.append(canary.start)
    app.on_cleanup.append(canary.close)
    return app


def parser() -> argparse.ArgumentParser:
    """The command line of `disagg worker canary` (render writes its args: tests parse them)."""
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg worker canary",
        description="Serve GET /ready: 200 while a canary P/D request (prefill max_tokens 1, "
        "then this pod's decode told where its KV is) passes, else 503.",
    )
    p.add_argument("--prefill", required=True, metavar="URL", help="the prefill pool's URL")
    p.add_argument("--decode", required=True, metavar="URL", help="this pod's engine URL")
    p.add_argument("--model", required=True, help="the model the engines serve")
    p.add_argument("--host", default="0.0.0.0", help="listen address of /ready")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    p.add_argument("--timeout-s", type=float, default=15.0, help="deadline over both hops")
    p.add_argument("--interval-s", type=float, default=7.0, help="at most one canary per this")
    p.add_argument("--fresh-s", type=float, default=45.0, help="a pass counts this long")
    p.add_argument(
        "--min-bandwidth-gbps",
        type=_positive,
        default=None,
        metavar="GB/S",
        help="say SlowTransport (still passing) when the KV moved slower than this "
        "(1e9 bytes/s); default: no floor",
    )
    for role, whose in (("prefill", "a prefill pod's"), ("decode", "this pod's")):
        p.add_argument(
            f"--{role}-ranks",
            type=_at_least_one,
            default=1,
            metavar="N",
            help=f"{whose} data-parallel engines, each with a side channel of its own: a "
            "canary sends one P/D request to each engine pair (the protocol tells each hop "
            "its engine)",
        )
    p.add_argument(
        "--wire-peer-port",
        type=int,
        metavar="PORT",
        help="probe the wire UCX chooses against the prefill pods' `disagg worker wire "
        "peer` on this port (at the --prefill URL's host); default: no wire probe",
    )
    p.add_argument(
        "--expect-wire",
        type=parse_expect_wire,
        action="append",
        metavar="SCOPE=WIRE[,WIRE]",
        help="say UnexpectedTransport (still passing) when UCX saw the peer in SCOPE "
        "(intra-node, inter-node) and chose none of these wires (tcp, rdma, "
        "shared-memory...); repeatable",
    )
    p.add_argument(
        "--wire-interval-s", type=float, default=300.0, help="at most one wire probe per this"
    )
    p.add_argument("--once", action="store_true", help="run one canary, print it, exit 0/1")
    pd.add_argument(p)
    return p


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def main(argv: list[str]) -> int:
    p = parser()
    args = p.parse_args(argv)
    ranks = (args.prefill_ranks, args.decode_ranks) != (1, 1)
    if ranks and args.pd_protocol.engine_rank(0) is None:
        p.error(
            f"--pd-protocol {args.pd_protocol.name} cannot send a hop to one engine; drop "
            "--prefill-ranks and --decode-ranks"
        )
    canary = Canary(from_args(args))
    if args.once:
        return asyncio.run(_once(canary))
    from disagg_worker.serve.process import serve

    async def ready(_: int) -> dict[str, Any]:
        return {"role": "canary", "prefill": canary.config.prefill, "decode": canary.config.decode}

    asyncio.run(serve(build_app(canary), args.host, args.port, ready))
    return 0


async def _once(canary: Canary) -> int:
    await canary.start()
    try:
        result = await canary.once()
        if result.passed:
            await canary.probe_wire()
        result = canary.wired(result)
    finally:
        await canary.close()
    line = {"event": "canary", "passed": result.passed, "took_ms": round(result.took_ms, 1)}
    line |= {"problem": result.problem, "transport": result.notes, **canary.kv_fields(result)}
    line |= wire_fields(result.wire, canary.config.expect_wire)
    line |= _ranks(result)
    print(json.dumps(line), flush=True)
    return 0 if result.passed else 1
