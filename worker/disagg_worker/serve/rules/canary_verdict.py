"""Transfer-path canary: when a canary is due, what its answers prove, and the verdict.

A canary is the P/D request pair any client makes through the engine's own API, in its
P/D protocol (:mod:`disagg_worker.serve.pd`); the decode can return a token only after
reading the prefill's KV, so a pass proves the whole path (DNS, side channel, KV
transport, both engines) at that moment. Readiness latches per engine instance
(:class:`Latch`) apart from the verdict, and a slow path passes with ``SlowTransport``, a
path over an unexpected wire with ``UnexpectedTransport``, because a path that still
serves must never make the pod unready. Timing, reasons and
bandwidth: docs/worker.md (the canary) and docs/derivation.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from disagg_contract.canary import BUSY, RECOMPUTED, SLOW, UNREACHABLE
from disagg_worker.serve.pd import KV_TRANSFER_PARAMS, PdProtocol
from disagg_worker.serve.pd.base import Page
from disagg_worker.serve.rules.canary_wire import Wire

# A short fixed text: a few tokens for any tokenizer, one KV block for any block size.
PROMPT = "The transfer path works."


@dataclass(frozen=True)
class Transfer:
    """The KV one canary's decode read: ``nbytes`` in ``seconds`` on the wire, as ``via``
    tells it (``answer``: the reference decode's own figures; ``metrics``: deltas of
    vLLM's NIXL histograms around the request, :mod:`~disagg_worker.serve.pd.evidence`)."""

    nbytes: float
    seconds: float
    via: str

    @property
    def gbytes_per_second(self) -> float:
        return self.nbytes / self.seconds / 1e9


@dataclass(frozen=True)
class Rank:
    """One P/D request of a canary over data-parallel engines: prefill engine ``prefill``
    to decode engine ``decode``, the side channel the prefill named (``host:port``, None:
    not told), what failed (None: passed) and the KV it measured."""

    prefill: int
    decode: int
    side_channel: str | None = None
    problem: str | None = None
    transfer: Transfer | None = None


@dataclass(frozen=True)
class Result:
    """One canary's outcome: ``at`` (monotonic seconds) when it ended, ``problem`` None when
    it passed, else what failed (which hop, which URL, why); ``transfer`` the KV it
    measured (None: no figure); ``ranks`` each engine pair's request (pods of
    data-parallel engines; empty for one engine a pod)."""

    at: float
    took_ms: float
    problem: str | None = None
    transfer: Transfer | None = None
    slow: str | None = None  # passed, but the KV moved below the floor (SlowTransport: ...)
    ranks: tuple[Rank, ...] = ()
    wire: Wire | None = None  # the wire probe's finding (None: not probed)
    odd: str | None = None  # passed, but over an unexpected wire (UnexpectedTransport: ...)

    @property
    def notes(self) -> str | None:
        """What a passing canary says besides passing: the wire first (it explains a slow
        path), then the bandwidth."""
        found = [n for n in (self.odd, self.slow) if n]
        return "; ".join(found) or None

    @property
    def passed(self) -> bool:
        return self.problem is None


@dataclass(frozen=True)
class Verdict:
    """What ``GET /ready`` answers: ``ready`` (200) or not (503), and why."""

    ready: bool
    reason: str


def request_body(model: str) -> dict[str, Any]:
    """The canary request; the P/D client (the proxy) turns it into the two hops."""
    return {"model": model, "prompt": PROMPT, "max_tokens": 1}


def rank_pairs(prefill: int, decode: int) -> list[tuple[int, int]]:
    """The (prefill engine, decode engine) pairs a canary sends one request each to, so
    that every engine of both pods serves one: max(prefill, decode) requests, request i
    to engines i mod each size."""
    return [(i % prefill, i % decode) for i in range(max(prefill, decode))]


def ranks_problem(ranks: tuple[Rank, ...] | list[Rank]) -> str | None:
    """The first engine pair's problem, led by the pair; else prefill engines that named
    one side channel (their requests reached one engine, not each); else None."""
    for r in ranks:
        if r.problem is not None:
            return f"prefill rank {r.prefill} to decode rank {r.decode}: {r.problem}"
    named: dict[str, int] = {}
    for r in ranks:
        if r.side_channel is None:
            continue
        first = named.setdefault(r.side_channel, r.prefill)
        if first != r.prefill:
            return (
                f"prefill ranks {first} and {r.prefill} both named side channel "
                f"{r.side_channel}: the request for rank {r.prefill} did not reach its own "
                "engine, so its side channel is unproven (is --data-parallel-size in the "
                "prefill's args, and does its vLLM take the data-parallel rank header?)"
            )
    return None


def slowest(ranks: tuple[Rank, ...] | list[Rank]) -> Transfer | None:
    """The measured transfer with the lowest bandwidth (what a floor is checked on)."""
    moved = [r.transfer for r in ranks if r.transfer is not None]
    return min(moved, key=lambda t: t.gbytes_per_second) if moved else None


def rank_fields(ranks: tuple[Rank, ...]) -> list[dict[str, Any]]:
    """Each engine pair's request as JSON (the canary's ``ranks`` field)."""
    return [
        {
            "prefill_rank": r.prefill,
            "decode_rank": r.decode,
            "side_channel": r.side_channel,
            "passed": r.problem is None,
            "problem": r.problem,
            "kv_gbytes_per_second": None
            if r.transfer is None
            else round(r.transfer.gbytes_per_second, 6),
        }
        for r in ranks
    ]


def due(last: Result | None, now: float, interval_s: float) -> bool:
    """A new canary runs when there is none yet or the last ended ``interval_s`` ago."""
    return last is None or now - last.at >= interval_s


def kv_problem(
    answer: dict[str, Any],
    before: Page | None = None,
    after: Page | None = None,
    protocol: PdProtocol = KV_TRANSFER_PARAMS,
) -> str | None:
    """None unless decode computed the prompt itself instead of reading the prefill's KV:
    correct tokens, but no P/D. The protocol says how to tell (the reference worker in its
    answer; vLLM only on its /metrics ``before`` and ``after`` the request:
    :mod:`~disagg_worker.serve.pd.evidence`). The message starts with :data:`RECOMPUTED`,
    the reason the canary reports."""
    why = protocol.recomputed(answer, before, after)
    return None if why is None else f"{RECOMPUTED}: {why}"


def measured(
    answer: dict[str, Any],
    before: Page | None = None,
    after: Page | None = None,
    protocol: PdProtocol = KV_TRANSFER_PARAMS,
) -> Transfer | None:
    """The KV the decode read for ``answer``, as the protocol measures it (vLLM's: the
    figures in a reference worker's answer, else the growth of vLLM's NIXL ``bytes`` and
    ``seconds`` sums from ``before`` to ``after``); None when nothing says, or nothing moved
    in measurable time."""
    found = protocol.moved(answer, before, after)
    if found is None or found[0] <= 0 or found[1] <= 0:
        return None
    return Transfer(*found)


def bandwidth_problem(moved: Transfer | None, floor_gbps: float | None) -> str | None:
    """None unless the KV moved slower than ``floor_gbps`` (GB/s); the message starts with
    :data:`SLOW`, the reason the canary reports. No floor or no figure: no problem."""
    if floor_gbps is None or moved is None or moved.gbytes_per_second >= floor_gbps:
        return None
    return (
        f"{SLOW}: the KV moved at {moved.gbytes_per_second:.3g} GB/s ({moved.nbytes:.0f} "
        f"bytes in {moved.seconds * 1e3:.3g} ms), below the floor of {floor_gbps:g} GB/s; "
        "check the RDMA device, UCX_TLS and UCX_NET_DEVICES"
    )


def kv_fields(moved: Transfer | None, floor_gbps: float | None) -> dict[str, Any]:
    """The canary's KV figures as JSON fields (its ``--once`` line, its /ready body):
    ``kv_bytes``, ``kv_seconds``, ``kv_gbytes_per_second`` (null when not measured),
    ``kv_measured_from``, ``kv_floor_gbytes_per_second`` and ``kv_bandwidth``, a sentence
    saying how it compares with the floor, or why it was not checked."""
    if moved is None:
        note = "not measured: the decode reported no KV transfer figures, so not checked"
    elif floor_gbps is None:
        note = "not checked: no floor"
    elif moved.gbytes_per_second < floor_gbps:
        note = f"below the floor of {floor_gbps:g} GB/s"
    else:
        note = f"at or above the floor of {floor_gbps:g} GB/s"
    return {
        "kv_bytes": None if moved is None else int(moved.nbytes),
        "kv_seconds": None if moved is None else round(moved.seconds, 9),
        "kv_gbytes_per_second": None if moved is None else round(moved.gbytes_per_second, 6),
        "kv_measured_from": None if moved is None else moved.via,
        "kv_floor_gbytes_per_second": floor_gbps,
        "kv_bandwidth": note,
    }


def token_problem(answer: dict[str, Any]) -> str | None:
    """None when decode's answer carries a generated token (vLLM: usage.completion_tokens or
    the choice's text; the reference worker also gives token_ids), else what is missing."""
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "decode answered 200 without choices"
    choice = choices[0]
    usage = answer.get("usage")
    counted = isinstance(usage, dict) and (usage.get("completion_tokens") or 0) >= 1
    if counted or choice.get("token_ids") or choice.get("text"):
        return None
    return "decode answered 200 but generated no token"


def verdict(last: Result | None, now: float, fresh_s: float) -> Verdict:
    """Ready while the last canary passed and ended at most ``fresh_s`` ago."""
    if last is None:
        return Verdict(False, "no canary has completed yet")
    if not last.passed:
        return Verdict(False, f"the last canary failed: {last.problem}")
    age = now - last.at
    if age > fresh_s:
        return Verdict(
            False, f"the last passing canary is {age:.0f} s old (fresh for {fresh_s:g} s)"
        )
    passed = f"the last canary passed {age:.0f} s ago in {last.took_ms:.0f} ms"
    return Verdict(True, f"{last.notes} ({passed})" if last.notes else passed)


def hop_problem(status: int, message: str) -> str:
    """A failed hop's problem, led by the reason it shows: :data:`BUSY` when the prefill hop
    ran out of the deadline, or answered that it is full (429/503), or took so long that
    the decode hop was never tried; :data:`UNREACHABLE` when nothing accepts the prefill
    hop's connection (no Ready pod behind the revision's Service, DNS, a policy). Other
    failures keep the proxy's words (CanaryFailing)."""
    prefill = message.startswith("prefill ")
    full = prefill and (status == 504 or " answered 429" in message or " answered 503" in message)
    if full or (message.startswith("decode ") and ": not tried, the " in message):
        return (
            f"{BUSY}: {message} (the prefill pool is saturated: requests queued ahead of the "
            "canary's; this pod stays Ready and serves what needs no prefill)"
        )
    if prefill and ": cannot connect" in message:
        return (
            f"{UNREACHABLE}: {message} (no prefill pod accepts the connection: none Ready "
            "behind the revision's Service, or DNS or a NetworkPolicy in the way)"
        )
    return message


def engine_identity(health: Any, metrics: str | None = None) -> str | None:
    """Which engine instance answers: the reference worker's /health ``pid`` and
    ``started_at``, else the start time vLLM's /metrics report for its server process
    (``process_start_time_seconds``, the Prometheus client's process collector); None when
    neither says (a restart is then seen only as the engine not answering)."""
    if isinstance(health, dict) and "pid" in health and "started_at" in health:
        return f"pid {health['pid']} started {health['started_at']}"
    for line in (metrics or "").splitlines():
        if line.startswith("process_start_time_seconds "):
            return f"started {line.split()[-1]}"
    return None


class Latch:
    """The pod's readiness: closed (Ready) from the first canary that passed on an engine
    instance until that instance is gone (it stops answering) or replaced (another
    :func:`engine_identity`). ``engine``: the instance proven, or last seen."""

    def __init__(self) -> None:
        self.ready = False
        self.engine: str | None = None

    def seen(self, identity: str | None, answers: bool) -> bool:
        """What the engine said now; True when that re-gates the pod (it was Ready for an
        instance that is no longer there)."""
        replaced = identity is not None and identity != self.engine
        if answers and not replaced:
            return False
        was = self.ready
        self.ready, self.engine = False, identity if answers else None
        return was

    def passed(self, identity: str | None) -> None:
        """A canary passed on instance ``identity`` (as seen before it ran)."""
        if identity == self.engine:
            self.ready = True


def flipped(before: Result | None, after: Result) -> bool:
    """The verdict changes between two canaries: the one moment worth a log line (the
    first result always counts, so the log says where the pod starts)."""
    return before is None or before.passed != after.passed
