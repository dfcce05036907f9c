"""``disagg bench operator``'s failover phase: the leader killed, a standby takes over.

Benchmark step (I/O: its own API emulator, ``disagg operator --leader-elect`` processes).
Replica op-0 starts and takes the Lease. Each round: a new replica starts as a standby; a
DisaggregatedDeployment is created and the leader reconciles it; after a random part of a
retry period (a crash comes at any moment, not in step with the renewals) the leader is
killed with SIGKILL (no lease release) and a new DisaggregatedDeployment is created at
once; the standby takes over and becomes the next round's leader. Figures:

- ``failover_s``: the worst round's SIGKILL → every pod of the new deployment exists (the
  standby saw the lease expire, took it, started kopf and reconciled); ``failover_p50_s``;
- ``failover_takeover_s``: the worst round's SIGKILL → the Lease names the standby;
- ``failover_rounds``, ``failover_lease_duration_s``: the lease duration used (renew
  deadline and retry period scale with it as client-go's defaults do, 10 / 8 / 2 s).

Expected: the lease duration, minus or plus up to a retry period (how long before the
kill the standby last saw a renewal, and when it first saw it), plus kopf's start and one
sync. :class:`Replica` and :class:`Setup` are reused by the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import random
import signal
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp

from disagg_operator.api import LABEL_DEPLOYMENT
from disagg_tools.bench.kubelet import DD_KEY, serve_crd

LEASE = "disagg-operator"
LEASE_KEY = "coordination.k8s.io/v1/leases"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--failover",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure failover_s with two operator processes",
    )
    p.add_argument(
        "--failover-lease-seconds",
        type=int,
        default=10,
        help="lease duration of the failover phase (renew deadline 0.8x, retry period 0.2x)",
    )
    p.add_argument("--failover-rounds", type=int, default=3, help="leaders killed, one by one")


def lease_args(duration_s: int) -> list[str]:
    """Flags for a lease of ``duration_s`` with client-go's proportions (10 / 8 / 2)."""
    return [
        f"--lease-duration-seconds={duration_s}",
        f"--renew-deadline-seconds={0.8 * duration_s:g}",
        f"--retry-period-seconds={0.2 * duration_s:g}",
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclasses.dataclass
class Replica:
    """One ``disagg operator --leader-elect`` process (its log in a file, not a pipe)."""

    name: str
    proc: asyncio.subprocess.Process
    health_port: int
    metrics_port: int
    log: Path

    @classmethod
    async def start(
        cls, name: str, kubeconfig: Path, namespace: str, args: list[str], workdir: Path
    ) -> Replica:
        """Start replica ``name`` (its POD_NAME) with its Lease in ``namespace``."""
        health, metrics = free_port(), free_port()
        cmd = [
            *(sys.executable, "-m", "disagg_operator.cli", "operator", "--leader-elect"),
            f"--lease-namespace={namespace}",
            f"--health-port={health}",
            f"--metrics-port={metrics}",
            "--bind-address=127.0.0.1",
            "--resync-seconds=0",
            "--log-level=info",
            *args,
        ]
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "POD_NAME": name}
        log = workdir / f"{name}.log"
        with log.open("wb") as sink:
            proc = await asyncio.create_subprocess_exec(
                *cmd, env=env, stdout=sink, stderr=asyncio.subprocess.STDOUT
            )
        return cls(name, proc, health, metrics, log)

    async def get(self, port: int, path: str) -> tuple[int, str]:
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}{path}") as r,
            ):
                return r.status, await r.text()
        except aiohttp.ClientError:
            return 0, ""

    async def health(self) -> dict[str, Any]:
        """The /healthz body, {} while nothing answers."""
        code, text = await self.get(self.health_port, "/healthz")
        return json.loads(text) if code == 200 else {}

    async def metric(self, name: str) -> list[str]:
        """The Prometheus sample lines of ``name`` on this replica."""
        _, text = await self.get(self.metrics_port, "/metrics")
        return [line for line in text.splitlines() if line.startswith(name)]

    def kill(self) -> None:
        """SIGKILL: a crash, nothing released."""
        self.proc.send_signal(signal.SIGKILL)

    async def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; the exit code."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), timeout)


def holder(emu: Any, namespace: str) -> str:
    """The Lease's holderIdentity in the emulator ("" when none)."""
    found = emu.find(LEASE_KEY, namespace, LEASE) or {}
    return str(found.get("spec", {}).get("holderIdentity") or "")


async def until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        await asyncio.sleep(0.02)


def pods_of(emu: Any, namespace: str | None, name: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in emu.objects_of("v1/pods", namespace)
        if p["metadata"].get("labels", {}).get(LABEL_DEPLOYMENT) == name
    ]


@dataclasses.dataclass
class Setup:
    """What the phase runs against: the emulator, a kubeconfig for it, the replicas' flags."""

    emu: Any
    kubeconfig: Path
    work: Path
    flags: list[str]
    namespace: str
    timeout: float
    replicas: list[Replica] = dataclasses.field(default_factory=list)

    async def replica(self, name: str) -> Replica:
        started = await Replica.start(name, self.kubeconfig, self.namespace, self.flags, self.work)
        self.replicas.append(started)
        return started

    async def until(self, what: str, check: Callable[[], Any]) -> Any:
        return await until(what, check, self.timeout)

    def holder(self) -> str:
        return holder(self.emu, self.namespace)

    def pods(self, name: str) -> int:
        """Pods of deployment ``name``, in any namespace."""
        return len(pods_of(self.emu, None, name))


@contextlib.asynccontextmanager
async def stage(
    what: str, namespace: str, flags: list[str], timeout: float
) -> AsyncIterator[Setup]:
    """An emulator of its own (the CRD registered), a kubeconfig for it in a temporary
    folder, and a :class:`Setup` whose replicas are killed on the way out."""
    import kmock

    from disagg_tools.emulator.server import Emulator, kubeconfig

    with tempfile.TemporaryDirectory(prefix=f"disagg-{what}-") as tmp:
        async with Emulator() as emu, kmock.Server(emu):
            serve_crd(emu)
            config = Path(tmp) / "kubeconfig"
            config.write_text(json.dumps(kubeconfig(str(emu.url).rstrip("/"))))
            setup = Setup(emu, config, Path(tmp), flags, namespace, timeout)
            try:
                yield setup
            finally:
                await reap(setup.replicas)


async def run(
    args: argparse.Namespace,
    body: Callable[[str], dict[str, Any]],
    namespace: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """The failover figures (module docstring); ``body(name)`` makes a 1P+1D deployment."""
    flags = lease_args(args.failover_lease_seconds)
    rng = random.Random(0)  # kill moments: reproducible, spread over a retry period
    async with stage("failover", namespace, flags, args.timeout) as setup:
        figures = await measure(
            setup,
            lambda name: setup.emu.put_object(DD_KEY, body(name)),
            progress,
            rounds=args.failover_rounds,
            pause=functools.partial(rng.uniform, 0, 0.2 * args.failover_lease_seconds),
        )
    return {**figures, "failover_lease_duration_s": args.failover_lease_seconds}


async def measure(
    setup: Setup,
    create: Callable[[str], Any],
    progress: Callable[[str], None],
    *,
    rounds: int,
    pause: Callable[[], float],
) -> dict[str, Any]:
    """``rounds`` leaders killed one after another (module docstring): the timings.

    ``pause()``: seconds to wait before each kill."""
    leader = await setup.replica("op-0")
    await setup.until("op-0 to lead", lambda: setup.holder().startswith("op-0_"))
    samples, takeovers = [], []
    for i in range(1, rounds + 1):
        progress(f"failover {i}/{rounds}: killing {leader.name}")
        leader, takeover, failover = await _round(setup, leader, f"op-{i}", create, pause())
        samples.append(failover)
        takeovers.append(takeover)
    await leader.stop()
    return {
        "failover_s": round(max(samples), 3),
        "failover_p50_s": round(statistics.median(samples), 3),
        "failover_takeover_s": round(max(takeovers), 3),
        "failover_rounds": rounds,
    }


async def _round(
    setup: Setup, leader: Replica, name: str, create: Callable[[str], Any], pause: float
) -> tuple[Replica, float, float]:
    """Start standby ``name``, kill ``leader``: (the new leader, takeover s, failover s)."""
    standby = await setup.replica(name)
    await setup.until(f"{name} to stand by", lambda: _state(standby, "standby"))
    create(f"before-{name}")
    await setup.until("the leader to reconcile", lambda: setup.pods(f"before-{name}") == 2)
    await asyncio.sleep(pause)
    leader.kill()
    killed = time.monotonic()
    create(f"after-{name}")
    await setup.until("the takeover", lambda: setup.holder().startswith(f"{name}_"))
    takeover = time.monotonic() - killed
    await setup.until("the new leader to reconcile", lambda: setup.pods(f"after-{name}") == 2)
    return standby, takeover, time.monotonic() - killed


async def reap(replicas: list[Replica]) -> None:
    for r in replicas:
        if r.proc.returncode is None:
            r.kill()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(r.proc.wait(), 10)


async def _state(replica: Replica, state: str) -> bool:
    """Whether ``replica``'s /healthz says ``state``; raises with its log if it died."""
    if replica.proc.returncode is not None:
        tail = replica.log.read_text()[-2000:]
        raise RuntimeError(f"{replica.name} exited {replica.proc.returncode}: {tail}")
    return (await replica.health()).get("leader") == state
