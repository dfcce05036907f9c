"""Posting a planned READ: in one piece, or in parts on worker threads, each waited on.

Effectful layer (NIXL through :class:`NixlAgent`; the split is the pure planner's,
:func:`plan.split_indices`). A READ of at least :data:`PARALLEL_MIN_BYTES` posted from
prepared lists, with worker threads, is split into one part per thread; every part is
posted and waited on until the deadline and reported as a :data:`PartResult`.
:func:`read_error` says why a READ that did not end DONE failed, and :func:`settle` waits
for the claim posted beside it. Releasing handles, notifying prefill and forgetting the
peer stay with the decode side (:mod:`decode`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import Any

from disagg_worker.transfer.nixl_agent import NixlAgent, PostMode
from disagg_worker.transfer.peers import PeerEntry, PeerRef, TransferError
from disagg_worker.transfer.rules.plan import IndexArray, TransferPlan, split_indices

# with DISAGG_NIXL_THREADS > 1, reads at least this large are split across that many threads
PARALLEL_MIN_BYTES = 8 << 20

# a slice of the plan's (local, remote) prepared-list indices; None: the whole plan
Part = tuple[IndexArray, IndexArray] | None
# (handle or None, final state or "POST" if posting raised, post seconds, error)
PartResult = tuple[Any, str, float, str]


def parts_of(
    plan: TransferPlan, threads: int, pool: ThreadPoolExecutor | None, post_mode: PostMode
) -> list[Part]:
    """The READ's parts: the whole plan, or one slice per thread when it is large, posted
    from prepared lists, and there is a ``pool`` of worker threads."""
    parts: list[Part] = [None]
    big = plan.bytes >= PARALLEL_MIN_BYTES
    if pool is not None and post_mode == "prepped" and big:
        local, remote = plan.local_indices(), plan.remote_indices()
        parts = list(split_indices(local, remote, threads))
    return parts


@dataclass(frozen=True)
class Posting:
    """One planned READ as its parts are posted: ``nixl()`` gives the agent as each part
    starts (once it is closed, it raises), ``post_mode`` how to post, ``entry`` the prefill
    read from, ``notif`` the notification the READ carries (b"": none), ``deadline`` when
    every part must have ended, ``merge`` whether contiguous runs were merged."""

    nixl: Callable[[], NixlAgent]
    post_mode: PostMode
    entry: PeerEntry
    plan: TransferPlan
    notif: bytes
    deadline: float
    merge: bool


def run_parts(
    posting: Posting, parts: list[Part], pool: ThreadPoolExecutor | None
) -> list[PartResult]:
    """Post and wait for every part: one on this thread, carrying the notification;
    several on ``pool``'s threads, carrying none (the caller notifies once all are done)."""
    if len(parts) == 1:
        return [run_part(posting, parts[0])]
    assert pool is not None
    quiet = replace(posting, notif=b"")
    futures = [pool.submit(run_part, quiet, part) for part in parts]
    return [f.result() for f in futures]


def run_part(posting: Posting, part: Part) -> PartResult:
    """Post one part and wait for it until the deadline."""
    agent = posting.nixl()
    t0 = time.perf_counter()
    try:
        handle, state = agent.post_read(
            posting.entry.remote, posting.plan, posting.notif,
            mode=posting.post_mode, merge=posting.merge, part=part,
        )  # fmt: skip
    except Exception as e:  # e.g. NIXL_ERR_REMOTE_DISCONNECT: the peer died or restarted
        return None, "POST", time.perf_counter() - t0, f"{type(e).__name__}: {e}"
    post_s = time.perf_counter() - t0
    return handle, agent.wait(handle, state, posting.deadline), post_s, ""


def read_error(
    peer: PeerRef, rid: str, results: list[PartResult], elapsed_ms: float
) -> TransferError:
    """Why a READ whose parts did not all end DONE failed: posting raised, a part missed
    the deadline, or NIXL reported ERR."""
    states = {r[1] for r in results}
    if "POST" in states:
        cause = next(r[3] for r in results if r[1] == "POST")
        return TransferError(
            f"posting READ of request {rid} from {peer} failed: {cause}; peer forgotten",
            "nixl_error",
        )
    if "PROC" in states:
        return TransferError(
            f"READ of request {rid} from {peer} missed its deadline "
            f"({elapsed_ms:.0f} ms); peer forgotten",
            "deadline",
        )
    return TransferError(
        f"READ of request {rid} from {peer} failed: NIXL state ERR; peer forgotten",
        "nixl_error",
    )


def settle(pending: Future[float] | None, deadline: float) -> float:
    """The result of the ask posted beside the transfer once it is answered (a claim's
    round trip in ms; a push's moment of answer); its TransferError if refused. An ask
    bounds its own wait (the side channel's timeout), so this waits at most that."""
    if pending is None:
        return 0.0
    try:
        return pending.result(timeout=max(deadline - time.perf_counter(), 0.0) + 1.0)
    except FutureTimeout:
        raise TransferError("the claim got no answer before the deadline", "deadline") from None
