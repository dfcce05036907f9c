"""`disagg bench flood`: the quickstart flooded past what its prefill can serve, and what
happens to work nobody waits for.

Benchmark script (I/O: starts the quickstart's pods and proxy as ``disagg up`` does, runs
client threads, the decode pod's transfer canary and metric readings). ``--clients``
threads send ``--prompt-tokens``-token prompts (8 tokens out, EOS ignored) through the
proxy for ``--flood-s`` seconds, each sending its next request when it has its answer and,
after a 503, waiting the Retry-After it was given; then they send no more and wait for the
answers in flight (a client gives up after ``--client-timeout-s``). Meanwhile the canary,
with the arguments the operator renders for the decode pod, runs as its sidecar runs it
(at most one per ``--interval-s``) until one passes after the flood's end.

Figures (:mod:`~disagg_tools.bench.rules.flood_figures`; meanings and targets:
docs/local-run.md, "Flood benchmark"): the clients' answers (200, shed 503s, 504s), when
the canary passed again after the flood's end, how long the prefill and decode engines
still had requests running or queued after the last client had its answer (work for
requests nobody waits for), and the cancels the workers counted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_tools.bench.e2e import format_columns, progress
from disagg_tools.bench.rules import flood_figures as ff
from disagg_tools.bench.rules.fault_requests import completion, prompt
from disagg_tools.local.engines.base import without_flag
from disagg_tools.local.rules.pods import CANARY, ROLE_LABEL
from disagg_tools.local.stack import Run, launch, load, render_manifest, stop_run
from disagg_worker.serve.canary import Canary, parser
from disagg_worker.serve.canary_config import CanaryConfig, from_args

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "examples" / "quickstart-cpu.yaml"
RETRY_CAP_S = 10.0  # the longest a client honours a Retry-After
SAMPLE_S = 0.2  # how often the engines' running and waiting gauges are read after the flood
SHED_MARK = "--pool-queue-s"  # what the proxy's shed 503 names (rules/shedding.message)
Sample = tuple[float, bool]


class Flood:
    """The client threads: each sends one request after another until :meth:`stop`."""

    def __init__(self, url: str, args: argparse.Namespace) -> None:
        self._url, self._args = url, args
        self._stop = threading.Event()
        self.answers: list[ff.Answer] = []
        self._threads = [
            threading.Thread(target=self._client, args=(random.Random(f"{args.seed}-{t}"),))
            for t in range(args.clients)
        ]

    def _client(self, rng: random.Random) -> None:
        n = self._args.prompt_tokens
        while not self._stop.is_set():
            answer, retry_after = _post(self._url, completion(prompt(rng, n, n)), self._args)
            self.answers.append(answer)  # list.append is atomic: no lock
            if answer.status == 503:
                self._stop.wait(min(retry_after, RETRY_CAP_S))
            elif answer.status != 200:
                self._stop.wait(0.05)

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> list[ff.Answer]:
        """Send no more; wait for the answers in flight; every answer."""
        self._stop.set()
        for t in self._threads:
            t.join()
        return list(self.answers)


def _post(url: str, body: dict[str, Any], args: argparse.Namespace) -> tuple[ff.Answer, float]:
    """One request: its record, and the Retry-After it was told (seconds)."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    start, shed, retry = time.monotonic(), False, 1.0
    try:
        with urllib.request.urlopen(req, timeout=args.client_timeout_s) as resp:
            resp.read()
            status = resp.status
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
        shed = status == 503 and SHED_MARK in text
        retry = float(e.headers.get("Retry-After") or 1)
    except (OSError, ValueError):  # refused, reset, or gave up (--client-timeout-s)
        status = ff.NO_ANSWER
    return ff.Answer(start, time.monotonic(), status, shed), retry


class CanaryLoop:
    """The decode pod's transfer canary as its sidecar runs it, in a thread of its own,
    until :meth:`stop`; every run recorded."""

    def __init__(self, config: CanaryConfig) -> None:
        self.config = config
        self.runs: list[ff.CanaryRun] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._loop()))

    async def _loop(self) -> None:
        canary = Canary(self.config)
        await canary.start()
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                result = await canary.once()
                self.runs.append(ff.CanaryRun(began, time.monotonic(), result.problem))
                rest = began + self.config.interval_s - time.monotonic()
                await asyncio.to_thread(self._stop.wait, max(0.0, rest))
        finally:
            await canary.close()

    def start(self) -> None:
        self._thread.start()

    def passed_since(self, since: float) -> bool:
        return any(r.passed and r.end >= since for r in self.runs)

    def stop(self) -> list[ff.CanaryRun]:
        self._stop.set()
        self._thread.join()
        return list(self.runs)


def canary_config(manifest: Path, prefill: str, decode: str) -> CanaryConfig:
    """The canary's settings as the operator renders them for the decode pod, pointed at
    the local prefill and decode."""
    objects, _ = render_manifest(load(str(manifest)), "unused")
    pod = next(
        o for o in objects if o["kind"] == "Pod" and o["metadata"]["labels"][ROLE_LABEL] == "decode"
    )
    args = next(c.get("args", []) for c in pod["spec"]["containers"] if c["name"] == CANARY)
    args = without_flag(without_flag(args, "--prefill"), "--decode")
    return from_args(parser().parse_args([*args, "--prefill", prefill, "--decode", decode]))


def series(url: str) -> dict[str, float]:
    """A /metrics page's samples, by series (name and labels as written)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def busy_samples(urls: dict[str, str], cap_s: float) -> dict[str, list[Sample]]:
    """Each engine's (time, running or waiting > 0) every SAMPLE_S, until every engine was
    seen idle or ``cap_s`` passed."""
    out: dict[str, list[Sample]] = {role: [] for role in urls}
    end = time.monotonic() + cap_s
    while time.monotonic() < end:
        for role, url in urls.items():
            page = series(url)
            busy = page["disagg_requests_running"] + page["disagg_requests_waiting"] > 0
            out[role].append((time.monotonic(), busy))
        if all(any(not b for _, b in samples) for samples in out.values()):
            break
        time.sleep(SAMPLE_S)
    return out


def worker_figures(
    before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """The cancels each worker counted during the run, and the mean time from a cancel to
    the engine letting go."""

    def delta(role: str, name: str) -> float:
        return after[role].get(name, 0.0) - before[role].get(name, 0.0)

    cancelled = {}
    for role in before:
        for name in after[role]:
            if name.startswith("disagg_requests_cancelled_total{") and delta(role, name):
                labels = name[name.index("{") + 1 : -1].replace('"', "")
                cancelled[f"{role} {labels}"] = int(delta(role, name))
    total = sum(delta(r, "disagg_cancel_stop_seconds_sum") for r in before)
    count = sum(delta(r, "disagg_cancel_stop_seconds_count") for r in before)
    return {"cancelled": cancelled, "cancel_stop_ms_mean": ff.stop_ms_mean(total, count)}


def measure(run: Run, args: argparse.Namespace) -> dict[str, Any]:
    """The flood, the canary and the readings on a started quickstart."""
    engines = {role: run.workers[role][0] for role in ("prefill", "decode")}
    before = {role: series(url) for role, url in engines.items()}
    loop = CanaryLoop(canary_config(Path(args.manifest), engines["prefill"], engines["decode"]))
    loop.start()
    flood = Flood(run.proxy_url + "/v1/completions", args)
    progress(f"flood: {args.clients} clients, {args.prompt_tokens}-token prompts, "
             f"{args.flood_s:g} s ...")  # fmt: skip
    try:
        flood.start()
        time.sleep(args.flood_s)
        end = time.monotonic()
        progress("  the flood ends: no new requests; waiting for the answers in flight ...")
        answers = flood.stop()
        progress(f"  last answer {time.monotonic() - end:.1f} s after the end; engines ...")
        samples = busy_samples(engines, args.settle_cap_s)
        _wait(lambda: loop.passed_since(end), end + args.settle_cap_s)
    finally:
        runs = loop.stop()
    figures = ff.client_figures(answers, end)
    last = end + figures["last_answer_after_end_s"]
    for role, got in samples.items():
        figures[f"{role}_busy_after_last_answer_s"] = ff.busy_after(got, last)
    figures.update(ff.canary_figures(runs, end))
    proxy = series(run.proxy_url)
    figures["proxy_shed"] = {
        role: int(proxy.get(f'disagg_proxy_shed_requests_total{{pool="{role}"}}', 0))
        for role in engines
    }
    figures.update(worker_figures(before, {role: series(url) for role, url in engines.items()}))
    return figures


def _wait(done: Callable[[], bool], until: float) -> None:
    while not done() and time.monotonic() < until:
        time.sleep(0.5)


def table(figures: dict[str, Any]) -> str:
    cols = [
        ("figure", "figure", "{:<34}"),
        ("value", "value", "{:>10}"),
        ("target", "target", "{:>18}"),
        ("met", "met", "{:>7}"),
    ]
    counts = "\n".join(ff.report_counts(figures))
    note = "see docs/local-run.md, 'Flood benchmark'."
    return format_columns(cols, ff.report_rows(figures), counts + "\n" + note)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench flood",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--clients", type=int, default=24, help="client threads")
    p.add_argument("--prompt-tokens", type=int, default=2000, help="tokens of every prompt")
    p.add_argument("--flood-s", type=float, default=75.0, help="how long the clients send")
    p.add_argument(
        "--client-timeout-s", type=float, default=120.0,
        help="a client gives up (closes its connection) after this; keep it above the "
        "proxy's 60 s deadline for the proxy to answer first",
    )  # fmt: skip
    p.add_argument(
        "--settle-cap-s", type=float, default=240.0,
        help="after the flood, wait at most this long for the canary to pass and the engines "
        "to go idle",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts")
    p.add_argument("--manifest", default=str(MANIFEST), help="a reference-engine manifest")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    run = Run([], {})
    with tempfile.TemporaryDirectory(prefix="disagg-bench-flood-") as tmp:
        try:
            progress(f"starting {Path(args.manifest).name} as `disagg up` does ...")
            launch(Path(args.manifest), Path(tmp), Path(tmp), run, port=0, say=progress)
            figures = measure(run, args)
        finally:
            stop_run(run)
    result = {
        "manifest": args.manifest,
        "clients": args.clients,
        "prompt_tokens": args.prompt_tokens,
        "flood_s": args.flood_s,
        "client_timeout_s": args.client_timeout_s,
        "seed": args.seed,
        **{k: figures.get(k) for k in ff.KEYS},
        "targets": ff.TARGETS,
        "met": ff.met(figures),
    }
    print(json.dumps(result, indent=2) if args.json else table(figures))
    return 0
