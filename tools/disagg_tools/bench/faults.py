"""`disagg bench faults`: the data path under load and under faults, on the quickstart.

Benchmark script (I/O: starts the quickstart's pods and proxy as ``disagg up`` does,
kills and restarts them, talks HTTP and ZMQ). Phases (``--only`` picks some): ``load``,
``bad-peer`` (a hung peer must cost only the requests that name it), ``restart``,
``release``, ``fuzz`` (:mod:`~disagg_tools.bench.rules.hostile_frames`) and
``prefill-kill``, which reports whether the proxy had a hop in flight on the killed
prefill, since a kill that hit an idle prefill tests nothing. Each phase, its figures and
targets: docs/local-run.md, "Faults benchmark".
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from disagg_contract import commandline
from disagg_contract.config import WorkerConfig
from disagg_tools.bench.e2e import format_columns, progress
from disagg_tools.bench.fault_clients import Body, Clients, flood, hung_peer, post, rss_mb
from disagg_tools.bench.rules import fault_figures as ff
from disagg_tools.bench.rules.fault_requests import completion, ghost_completion, prompt
from disagg_tools.bench.rules.hostile_frames import HostileFrames
from disagg_tools.local.children import Child
from disagg_tools.local.stack import (
    Run,
    launch,
    restarts,
    side_channel,
    stop_run,
    wait_pod_ready,
    wait_restarted,
)
from disagg_worker.transfer.handshake import load_secret

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "examples" / "quickstart-cpu.yaml"
PHASES = ("load", "bad-peer", "restart", "release", "fuzz", "prefill-kill")
HEALTHY_CLIENTS = 4
BAD_CLIENTS = 16
START_TIMEOUT_S = 120.0  # a reference worker's start, as `disagg up` allows it
RELEASE_CAP_S = 40.0  # above the prefill's 30 s lease: a missed release still shows
SETTLE_S = 2.0  # after the flood, before the second RSS reading


@dataclass
class Stack:
    """The quickstart as started here (its pods on the run's local kubelet, which restarts
    what dies)."""

    run: Run

    def url(self, role: str) -> str:
        return self.run.workers[role][0]

    def name(self, role: str) -> str:
        return self.run.names[self.url(role)]

    def child(self, role: str) -> Child:
        return self.run.engines[self.name(role)]

    @property
    def completions(self) -> str:
        return self.run.proxy_url + "/v1/completions"

    @property
    def block_size(self) -> int:
        env = self.child("decode").env
        return int(env.get("DISAGG_BLOCK_SIZE") or WorkerConfig.model_fields["block_size"].default)


def _body(shortest: int, longest: int) -> Body:
    return lambda rng, _: completion(prompt(rng, shortest, longest))


def phase_load(s: Stack, args: argparse.Namespace) -> dict[str, Any]:
    progress(f"load: {args.clients} clients for {args.load_s:g} s, prompts 16..1024 tokens ...")
    clients = Clients(s.completions, _body(16, 1024), args.clients, f"{args.seed}-load")
    figures = ff.load_figures(clients.run_for(args.load_s), args.clients)
    progress(
        f"  {figures['load_requests']} requests, {figures['load_failed']} failed, "
        f"p50 {figures['load_p50_ms']:.0f} ms, p99 {figures['load_p99_ms']:.0f} ms, "
        f"{figures['load_rps']:.1f} req/s"
    )
    return figures


def phase_bad_peer(s: Stack, args: argparse.Namespace) -> dict[str, Any]:
    healthy = _body(64, 256)
    progress(f"bad peer: baseline, {HEALTHY_CLIENTS} clients for {args.phase_s:g} s ...")
    base = Clients(s.completions, healthy, HEALTHY_CLIENTS, f"{args.seed}-base")
    baseline = base.run_for(args.phase_s)
    numbers = itertools.count()
    key = load_secret(s.child("decode").env.get("DISAGG_HMAC_SECRET_PATH"))
    with hung_peer() as port:
        progress(f"  the same load while {BAD_CLIENTS} threads name a hung prefill :{port} ...")

        def ghost(rng: random.Random, _: int) -> dict[str, Any]:
            tokens = prompt(rng, 64, 256)
            return ghost_completion(tokens, port, next(numbers), s.block_size, key)

        bad = Clients(s.url("decode") + "/v1/completions", ghost, BAD_CLIENTS, f"{args.seed}-bad")
        bad.start()
        try:
            during = Clients(s.completions, healthy, HEALTHY_CLIENTS, f"{args.seed}-during")
            healthy_records = during.run_for(args.phase_s)
        finally:
            bad_records = bad.stop()
    figures = {
        "baseline_p99_ms": ff.latency_p(baseline, 99),
        "baseline_failed": ff.failed(baseline),
        "bad_peer_healthy_p99_ms": ff.latency_p(healthy_records, 99),
        "bad_peer_healthy_failed": ff.failed(healthy_records),
        "bad_peer_healthy_requests": len(healthy_records),
        "bad_peer_requests": len(bad_records),
        "bad_peer_statuses": ff.status_counts(bad_records),
    }
    progress(
        f"  healthy p99 {figures['baseline_p99_ms']:.0f} ms → "
        f"{figures['bad_peer_healthy_p99_ms']:.0f} ms with the bad peer; "
        f"{figures['bad_peer_requests']} bad requests: {figures['bad_peer_statuses']}"
    )
    return figures


def phase_restart(s: Stack, args: argparse.Namespace) -> dict[str, Any]:
    name = s.name("prefill")
    progress(f"prefill restart: {HEALTHY_CLIENTS} clients; SIGKILL {name} under load ...")
    clients = Clients(s.completions, _body(64, 256), HEALTHY_CLIENTS, f"{args.seed}-restart")
    clients.start()
    try:
        time.sleep(args.phase_s / 4)
        kill_at, before = time.monotonic(), restarts(s.run, name)
        os.killpg(s.child("prefill").proc.pid, signal.SIGKILL)  # the kubelet restarts it
        wait_restarted(s.run, name, before, START_TIMEOUT_S)
        ready_at = time.monotonic()
        time.sleep(args.phase_s * 5 / 8)
    finally:
        records = clients.stop()
    figures = ff.restart_figures(records, kill_at, ready_at)
    progress(
        f"  ready again {figures['prefill_restart_ready_s']:.1f} s after the kill; requests "
        f"{figures['prefill_restart_requests']}: {figures['prefill_restart_down_failed']} "
        f"failed while it was down, {figures['prefill_restart_failed']} after"
    )
    return figures


def phase_release(s: Stack, args: argparse.Namespace) -> dict[str, Any]:
    prefill, decode = s.url("prefill"), s.child("decode")
    lease = WorkerConfig.model_fields["block_lease_s"].default
    if _blocks_free_at(prefill, lease + 5.0, 0.1) is None:
        progress("  (the prefill still holds blocks from earlier phases; measuring anyway)")
    progress(f"release: SIGKILL {decode.name}, one request through the proxy ...")
    before = restarts(s.run, s.name("decode"))
    os.killpg(decode.proc.pid, signal.SIGKILL)
    decode.proc.wait()
    try:
        rng = random.Random(f"{args.seed}-release")
        answer = post(s.completions, completion(prompt(rng, 128, 128)))
        freed = _blocks_free_at(prefill, RELEASE_CAP_S, 0.005)
        took = (freed if freed is not None else time.monotonic()) - answer.end
        progress(
            f"  the proxy answered {answer.status}; the prefill's blocks were "
            + (f"free {took:.3f} s later" if freed else f"still held after {took:.0f} s")
        )
    finally:  # the kubelet restarts it, maybe after a back-off
        wait_restarted(s.run, s.name("decode"), before, START_TIMEOUT_S)
    return {
        "release_status": answer.status,
        "release_after_decode_fail_s": round(took, 3),
        "release_freed": freed is not None,
    }


def _blocks_free_at(worker: str, within_s: float, every_s: float) -> float | None:
    """When the worker's /debug/blocks first showed none used (monotonic), polling every
    ``every_s``; None if not within ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        with urllib.request.urlopen(worker + "/debug/blocks", timeout=5) as resp:
            used = json.load(resp)["used"]
        now = time.monotonic()
        if used == 0:
            return now
        if now >= deadline:
            return None
        time.sleep(every_s)


def phase_fuzz(s: Stack, args: argparse.Namespace) -> dict[str, Any]:
    child = s.child("prefill")
    pid = child.proc.pid  # the worker itself: `disagg worker serve` runs in-process
    host, port = side_channel(s.run, s.name("prefill"))  # where the prefill pod listens
    secret = load_secret(child.env.get("DISAGG_HMAC_SECRET_PATH"))
    before = rss_mb(pid)
    progress(f"fuzz: {args.fuzz_frames} hostile frames at {host}:{port}; RSS {before:.1f} MiB")
    frames = HostileFrames(random.Random(f"{args.seed}-fuzz"), secret).frames(args.fuzz_frames)
    result = flood(host, port, frames)
    time.sleep(SETTLE_S)
    alive = child.proc.poll() is None
    after = rss_mb(pid) if alive else 0.0
    check = post(s.completions, completion(prompt(random.Random(args.seed), 64, 64)))
    serves = alive and check.ok and child.proc.pid == pid
    progress(
        f"  {result.sent} frames in {result.seconds:.1f} s, {result.answered} answered; RSS "
        f"{before:.1f} → {after:.1f} MiB; a request after it: {check.status}"
    )
    return {
        "fuzz_frames": result.sent,
        "fuzz_answered": result.answered,
        "fuzz_kinds": result.kinds,
        "fuzz_s": round(result.seconds, 2),
        "fuzz_rss_before_mb": round(before, 1),
        "fuzz_rss_after_mb": round(after, 1),
        "fuzz_rss_growth_mb": round(after - before, 1),
        "fuzz_still_serves": serves,
    }


RUNNERS: dict[str, Callable[[Stack, argparse.Namespace], dict[str, Any]]] = {
    "load": phase_load,
    "bad-peer": phase_bad_peer,
    "restart": phase_restart,
    "release": phase_release,
    "fuzz": phase_fuzz,
}


def _serving(s: Stack) -> None:
    """Before a phase: every pod is Ready (one whose process died is restarted by the
    kubelet first), so a crash in one phase is not counted against the next."""
    for name, child in s.run.engines.items():
        if child.proc.poll() is not None:
            progress(f"  {name} is not running; waiting for its restart before the next phase")
        wait_pod_ready(s.run, name, START_TIMEOUT_S)


def phase_prefill_kill(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    manifest = yaml.safe_load(Path(args.manifest).read_text())
    manifest["spec"]["prefill"]["replicas"] = 2
    path = tmp / "two-prefills.yaml"
    path.write_text(yaml.safe_dump(manifest))
    run = Run([], {})
    try:
        progress("prefill kill: the manifest with two prefills ...")
        launch(path, tmp, tmp, run, port=0, say=progress)
        victim_url = run.workers["prefill"][1]
        victim = run.engines[run.names[victim_url]]
        completions = run.proxy_url + "/v1/completions"
        post(completions, completion(prompt(random.Random(0), 64, 64)))  # warm-up
        progress(f"  {args.clients} clients for {2 * args.phase_s:g} s; SIGKILL {victim.name} ...")
        clients = Clients(completions, _body(64, 512), args.clients, f"{args.seed}-kill")
        clients.start()
        try:
            time.sleep(args.phase_s / 2)
            inflight = _kill_busy(run.proxy_url, victim_url, victim, args.phase_s)
            time.sleep(args.phase_s * 3 / 2)
        finally:
            records = clients.stop()
        with urllib.request.urlopen(run.proxy_url + "/health", timeout=10) as resp:
            health = json.load(resp)
    finally:
        stop_run(run)
    figures = ff.prefill_kill_figures(records, inflight, health)
    progress(
        f"  {figures['prefill_kill_requests']} requests, {inflight} in flight on the killed "
        f"prefill, {figures['prefill_kill_client_failed']} failed; "
        f"{figures['prefill_kill_prefill_failovers']} prefill hops moved on, "
        f"{figures['prefill_kill_decode_retries']} decode retries"
    )
    return figures


def _kill_busy(proxy_url: str, victim_url: str, victim: Child, within_s: float) -> int:
    """SIGKILL ``victim`` as soon as the proxy has a hop in flight on it (at most
    ``within_s`` of waiting, then regardless); the hops in flight it read just before."""
    inflight, end = 0, time.monotonic() + within_s
    while time.monotonic() < end:
        with urllib.request.urlopen(proxy_url + "/health", timeout=10) as resp:
            pool = json.load(resp)["prefill"]
        inflight = next(b["inflight"] for b in pool if b["url"] == victim_url.rstrip("/"))
        if inflight > 0:
            break
        time.sleep(0.002)
    victim.proc.send_signal(signal.SIGKILL)
    return int(inflight)


def run_phases(args: argparse.Namespace, phases: list[str]) -> dict[str, Any]:
    figures: dict[str, Any] = dict.fromkeys(ff.KEYS)
    run = Run([], {})
    if phases == ["prefill-kill"]:  # a run of its own: the quickstart is not needed
        with tempfile.TemporaryDirectory(prefix="disagg-bench-faults-") as tmp:
            figures.update(phase_prefill_kill(args, Path(tmp)))
        return figures
    with tempfile.TemporaryDirectory(prefix="disagg-bench-faults-") as tmp:
        try:
            progress(f"starting {MANIFEST.name} as `disagg up` does ...")
            launch(Path(args.manifest), Path(tmp), Path(tmp), run, port=0, say=progress)
            s = Stack(run)
            warm = post(s.completions, completion(prompt(random.Random(0), 64, 64)))
            progress(f"  warm-up request through the proxy: {warm.status} in {warm.ms:.0f} ms")
            for phase in (p for p in phases if p in RUNNERS):
                _serving(s)
                figures.update(RUNNERS[phase](s, args))
        finally:
            stop_run(run)
        if "prefill-kill" in phases:
            figures.update(phase_prefill_kill(args, Path(tmp)))
    return figures


def table(figures: dict[str, Any]) -> str:
    cols = [
        ("figure", "figure", "{:<30}"),
        ("value", "value", "{:>10}"),
        ("target", "target", "{:>24}"),
        ("met", "met", "{:>7}"),
    ]
    counts = "\n".join(ff.report_counts(figures))
    note = (
        "times in ms unless _s; p99 over the requests answered 200; see docs/local-run.md, "
        "'Faults benchmark'."
    )
    return format_columns(cols, ff.report_rows(figures), counts + "\n" + note)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench faults",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--load-s", type=float, default=60.0, help="length of the load phase")
    p.add_argument("--clients", type=int, default=16, help="client threads of the load phase")
    p.add_argument("--phase-s", type=float, default=8.0, help="windows of bad-peer and restart")
    p.add_argument("--fuzz-frames", type=int, default=10_000, help="hostile frames to send")
    p.add_argument("--only", default=",".join(PHASES), help=f"phases: {','.join(PHASES)}")
    p.add_argument("--seed", type=int, default=0, help="seed of prompts and frames")
    p.add_argument("--manifest", default=str(MANIFEST), help="a reference-engine manifest")
    return p


def main(argv: list[str]) -> int:
    p = _parser()
    args = p.parse_args(argv)
    phases = [x.strip() for x in args.only.split(",") if x.strip()]
    unknown = [x for x in phases if x not in PHASES]
    if unknown or not phases:
        p.error(f"--only: {','.join(unknown) or '(none)'}: phases are {','.join(PHASES)}")
    figures = run_phases(args, phases)
    result = {
        "manifest": args.manifest,
        "phases": phases,
        "load_s": args.load_s,
        "phase_s": args.phase_s,
        "seed": args.seed,
        **figures,
        "targets": ff.TARGETS,
        "met": ff.met(figures),
    }
    print(json.dumps(result, indent=2) if args.json else table(figures))
    return 0
