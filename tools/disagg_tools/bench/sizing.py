"""``disagg bench operator``'s sizing phase: the operator process alone, at fleet size.

Benchmark step (I/O: its own API emulator, one ``disagg operator --leader-elect``
process, started as the chart starts it; the deployments have ``--prefill`` + ``--decode``
pods). The converge phase's RSS is one process holding
the operator, the API emulator (every object and its watch history) and the bench: an
upper bound. Here the operator runs in a process of its own: ``--sizing`` deployments are
created, the bench plays the kubelet (each new pod Ready), and once every deployment is
Ready the operator's memory is read. Figures:

- ``operator_rss_mb``: the operator process's peak RSS, sampled every 0.1 s from its
  start until every deployment is Ready and 2 s after (what a memory limit must allow);
- ``operator_rss_settled_mb``: its RSS 2 s after the last deployment turned Ready;
- ``operator_rss_idle_mb``: its RSS once it leads, before any deployment (the baseline);
- ``operator_mb_per_deployment``: (peak - idle) / ``sizing_crs``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from disagg_tools.bench import failover
from disagg_tools.bench.kubelet import DD_KEY, Kubelet, deployment_ready

MB = 2**20


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sizing",
        type=int,
        default=1000,
        help="deployments for the operator process's own RSS (0: skip)",
    )


class Watcher:
    """Plays the kubelet for the pods the operator creates and samples its RSS."""

    def __init__(self, emu: Any, pid: int) -> None:
        import psutil

        self.pods, self.proc, self.peak = Kubelet(emu), psutil.Process(pid), 0

    def tick(self) -> None:
        self.peak = max(self.peak, self.proc.memory_info().rss)
        self.pods.tick()


async def run(
    args: argparse.Namespace,
    body: Callable[[str], dict[str, Any]],
    namespace: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """The sizing figures (module docstring); ``body(name)`` makes one deployment."""
    import asyncio

    count, flags = args.sizing, failover.lease_args(10)
    async with failover.stage("sizing", namespace, flags, args.timeout) as setup:
        emu = setup.emu
        op = await setup.replica("op-sizing")
        await setup.until("the operator to lead", lambda: setup.holder() != "")
        watcher = Watcher(emu, op.proc.pid)
        watcher.tick()
        idle = watcher.peak
        names = [f"size-{i}" for i in range(count)]
        for name in names:
            emu.put_object(DD_KEY, body(name))
        deadline, done = time.monotonic() + args.timeout, 0
        while done < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"gave up waiting for {count} deployments to be Ready")
            watcher.tick()
            done = sum(deployment_ready(emu, namespace, n) for n in names)
            progress(f"sizing: {done}/{count} Ready")
            await asyncio.sleep(0.1)
        settled = time.monotonic() + 2.0
        while time.monotonic() < settled:
            watcher.tick()
            await asyncio.sleep(0.1)
        now = watcher.proc.memory_info().rss
    return {
        "sizing_crs": count,
        "operator_rss_mb": round(watcher.peak / MB, 1),
        "operator_rss_settled_mb": round(now / MB, 1),
        "operator_rss_idle_mb": round(idle / MB, 1),
        "operator_mb_per_deployment": round((watcher.peak - idle) / MB / max(count, 1), 3),
    }
