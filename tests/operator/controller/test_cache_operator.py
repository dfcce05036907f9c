"""The real operator reads from its watch-fed cache: no GET or LIST per sync, drift healed by
the resync's one listing per kind, 429 answers waited out."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from disagg_operator.api import kinds as kind_table
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.reconciler import Reconciler
from disagg_operator.controller.run import running
from tests.operator.conftest import (
    DD,
    DD_PATH,
    NS,
    api,
    condition,
    pods,
    quickstart,
    until,
)
from tests.support.emulator import Emulator


@contextlib.asynccontextmanager
async def kubelet(emu: Emulator) -> AsyncIterator[None]:
    """Mark every pod Ready as soon as it exists (no controller does it here)."""

    async def run() -> None:
        while True:
            for name, pod in pods(emu).items():
                if not (pod.get("status") or {}).get("conditions"):
                    emu.set_pod_ready(NS, name)
            await asyncio.sleep(0.02)

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        task.cancel()


WATCHED = {"disaggregateddeployments", *(k.plural for k in kind_table.WATCHED)}
# Kinds no watch covers, read by name (the InferencePool: the CRD defaults spec.llmd in, so
# an apiserver hands the operator every deployment with an llmd section to look it up by)
BY_NAME = {k.plural for k in kind_table.CHILDREN if k.access == "by-name"}


async def watching(emu: Emulator) -> int:
    """Wait until kopf's initial list + watch of every kind is done; the calls so far."""
    await until(
        "the initial watches",
        lambda: {c.resource for c in emu.calls if c.verb == "watch"} >= WATCHED,
    )
    return len(emu.calls)


def rollout_done(emu: Emulator, decode: int) -> Any:
    status = (emu.find(DD, NS, "demo") or {}).get("status") or {}
    progressing = condition(emu, "demo", "Progressing").get("reason")
    decoded = [n for n in pods(emu) if "-decode-" in n]
    return progressing == "RolloutComplete" and len(decoded) == decode and status


async def test_create_scale_and_roll_make_no_get_or_list(emulator: Emulator) -> None:
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"))), kubelet(emulator):
        started = await watching(emulator)
        await api(emulator, "POST", DD_PATH, quickstart())
        await until("created and Ready", lambda: rollout_done(emulator, 1))
        scale = {"spec": {"decode": {"replicas": 3}}}
        await api(emulator, "PATCH", f"{DD_PATH}/demo", scale)
        await until("scaled to 3 decode pods", lambda: rollout_done(emulator, 3))
        roll = {"spec": {"decode": {"nodeSelector": {"pool": "decode-b"}}}}
        await api(emulator, "PATCH", f"{DD_PATH}/demo", roll)
        await until(
            "rolled",
            lambda: (
                rollout_done(emulator, 3)
                and all(
                    p["spec"].get("nodeSelector")
                    for n, p in pods(emulator).items()
                    if "-decode-" in n
                )
            ),
        )
    ours = emulator.calls[started:]
    writes = [c for c in ours if c.verb in {"create", "patch", "delete"}]
    assert len(writes) > 10  # the work happened ...
    reads = [c for c in ours if c.verb in {"get", "list"}]
    # ... from the cache alone: no LIST, and a GET only by name of a kind no watch covers
    assert [c for c in reads if c.verb == "list" or c.resource not in BY_NAME or not c.name] == []


def record_passes(monkeypatch: pytest.MonkeyPatch, emu: Emulator) -> list[list[int]]:
    """Spy on the resync's drift check (the real one runs): per pass, the range
    ``[first, end)`` of ``emu.calls`` it made (``end`` is -1 while it runs). Passes are
    then counted, not timed, and a pass's LISTs are the calls in its range (the emulator
    records a call as it serves it, in this event loop)."""
    passes: list[list[int]] = []
    check_drift = Reconciler.check_drift

    async def recorded(self: Reconciler, namespaces: Sequence[str]) -> None:
        passes.append(span := [len(emu.calls), -1])
        await check_drift(self, namespaces)
        span[1] = len(emu.calls)

    monkeypatch.setattr(Reconciler, "check_drift", recorded)
    return passes


async def test_resync_lists_each_child_kind_once_and_recreates_a_lost_pod(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes = record_passes(monkeypatch, emulator)
    async with (
        running(OperatorConfig(host=str(emulator.url).rstrip("/"), resync_seconds=0.3)),
        kubelet(emulator),
    ):
        for name in ("demo", "other", "third"):
            await api(emulator, "POST", DD_PATH, quickstart(name))
        await until("Ready", lambda: condition(emulator, "demo").get("status") == "True")
        lost = pods(emulator)["demo-decode-0"]["metadata"]["uid"]
        started = len(emulator.calls)
        emulator.lose_object("v1/pods", NS, "demo-decode-0")  # gone, and no watch event
        await until(
            "the pod back",
            lambda: (
                (pods(emulator).get("demo-decode-0") or {}).get("metadata", {}).get("uid")
                not in (None, lost)
            ),
        )
        later = len(passes)  # passes that start from here on begin after the pod is back
        await until("two more resync passes", lambda: [e for _, e in passes[later:] if e > 0][1:])
    calls = emulator.calls
    by_name = [c for c in calls[started:] if c.verb == "get" and c.resource in BY_NAME]
    assert all(c.name for c in by_name)  # the pool each sync looks up, by name
    reads = [
        i
        for i in range(started, len(calls))
        if calls[i].verb in {"get", "list"} and calls[i] not in by_name
    ]
    kinds = {k.plural for k in kind_table.WATCHED}  # pods, services, ..., Deployments
    assert "deployments" in kinds
    # every watched child kind, never the custom resources themselves, no GET ...
    assert reads and {calls[i].resource for i in reads} == kinds
    assert {calls[i].verb for i in reads} == {"list"}
    # ... and all of them made by a drift check (the last one may have been stopped)
    spans = [range(first, end if end >= 0 else len(calls)) for first, end in passes]
    assert [i for i in reads if not any(i in span for span in spans)] == []
    # one LIST per kind and pass, whatever the CRs (three here)
    done = [range(first, end) for first, end in passes if first >= started and end >= 0]
    assert len(done) >= 2
    for span in done:
        assert sorted(calls[i].resource for i in span if calls[i].verb == "list") == sorted(kinds)


async def test_writes_answered_429_are_retried_after_retry_after(emulator: Emulator) -> None:
    emulator.throttle("v1/pods", count=3, retry_after=0, verb="create")
    async with running(OperatorConfig(host=str(emulator.url).rstrip("/"))), kubelet(emulator):
        await api(emulator, "POST", DD_PATH, quickstart())
        await until("Ready", lambda: condition(emulator, "demo").get("status") == "True")
    creates = [c for c in emulator.calls if c.verb == "create" and c.resource == "pods"]
    assert len(creates) == 2 + 3  # two pods, three of the attempts answered 429
    assert condition(emulator, "demo", "Degraded").get("status") == "False"
