"""`disagg bench pods`: the quickstart's P/D path as local processes and as pods of
containers, measured in one run, request by request, against the path's iperf3 limits.

Benchmark layer. The manifest (default examples/quickstart-cpu.yaml, a reference-engine
manifest) runs at once as local processes (``disagg up``) and as podman pods (``disagg up
--runtime podman``: each pod its own network namespace, KV over UCX TCP between them), and,
with ``--ucx NAME:K=V,...``, once more as pods per variant whose pools both carry that env
on top of the rendered one (a role's env wins over what the operator derives). Requests are
interleaved: each round sends every prompt length to every run, the runs' order rotating,
so all of them see the same machine. Each request is streamed (:mod:`disagg_tools.bench.
stream`: TTFT as the client sees it, of a request generating ``MIN_TOKENS`` tokens); its
KV bytes and NIXL READ time are the decode workers' counters around it
(:mod:`.pod_figures`). Each round ends with the path's limits of each run of pods: iperf3
from the prefill pod's network namespace to the decode pod's, one stream and several
(:mod:`.iperf`); ``nixl_vs_iperf3_single`` / ``_multi`` are NIXL's median rate over the
median limit, the share of that path NIXL's READ gets.
Progress goes to stderr, figures to stdout (``--json`` or a table).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from disagg_contract import commandline
from disagg_contract.config import WorkerConfig
from disagg_tools.bench import iperf
from disagg_tools.bench import pod_figures as figures
from disagg_tools.bench.stream import MIN_TOKENS, stream_completion
from disagg_tools.local.podman.launch import launch_containers
from disagg_tools.local.podman.runtime import PodRuntime
from disagg_tools.local.stack import Run, get_json, launch, load, stop_run

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # pod IPs: no proxy
_VARIANT = re.compile(r"^([a-z0-9](?:[-a-z0-9]{0,14}[a-z0-9])?):(.*)$")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _prompt(n: int) -> list[int]:
    return [1] + [(i * 37 + 11) % 256 for i in range(n - 1)]


@dataclass
class Target:
    """One run of the manifest: its processes or pods, and the env a variant adds."""

    name: str
    run: Run
    env: dict[str, str] = field(default_factory=dict)
    pods: PodRuntime | None = None


TRANSFER_MODE = WorkerConfig.env_name("transfer_mode")


def _settable(name: str) -> bool:
    return name.startswith("UCX_") or name == TRANSFER_MODE


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """``NAME:K=V,K=V`` → (name, env); names are short DNS labels, keys UCX_* settings or
    DISAGG_TRANSFER_MODE (``push:DISAGG_TRANSFER_MODE=push``: the prefill pushes the KV
    instead of decode READing it)."""
    found = _VARIANT.match(text)
    pairs = [p.partition("=") for p in found.group(2).split(",")] if found else []
    if not found or not pairs or any(not _settable(k) or not s for k, s, _ in pairs):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME:UCX_X=V[,UCX_Y=W] or NAME:{TRANSFER_MODE}=push "
            "(NAME: up to 16 of a-z, 0-9, -)"
        )
    return found.group(1), {k: v for k, _, v in pairs}


def variant_manifest(manifest: Path, name: str, env: dict[str, str], folder: Path) -> Path:
    """``manifest`` renamed ``<its name>-<name>`` (pods of two runs never share a name), both
    roles carrying ``env`` over their own; DISAGG_TRANSFER_MODE becomes the deployment's
    spec.kvTransfer.mode (a role's own is refused: it would make a mixed pair)."""
    body = load(str(manifest))
    body["metadata"] = {**body["metadata"], "name": f"{body['metadata']['name']}-{name}"}
    env = dict(env)
    if TRANSFER_MODE in env:
        mode = "push" if env.pop(TRANSFER_MODE) == "push" else "pull"
        body["spec"].setdefault("kvTransfer", {})["mode"] = mode
    for role in ("prefill", "decode"):
        spec = body["spec"][role]
        own = [e for e in spec.get("env") or [] if e.get("name") not in env]
        spec["env"] = [*own, *({"name": k, "value": v} for k, v in env.items())]
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@contextlib.contextmanager
def started(manifest: Path, variants: list[tuple[str, dict[str, str]]]) -> Iterator[list[Target]]:
    """The process run, the pods as rendered and one run of pods per variant, all up;
    everything they made is stopped and removed on the way out."""
    hurry = threading.Event()
    hurry.set()  # a benchmark does not wait for preStop hooks
    targets: list[Target] = []
    with tempfile.TemporaryDirectory(prefix="disagg-bench-pods-") as tmp:
        try:
            folder = Path(tmp)
            targets.append(Target(figures.PROCESS, Run([], {})))
            launch(manifest, _dir(folder, "process"), _dir(folder, "process"), targets[-1].run,
                   say=_say)  # fmt: skip
            for name, env in [("", {}), *variants]:
                where = _dir(folder, name or "podman")
                m = variant_manifest(manifest, name, env, folder) if name else manifest
                t = Target(f"{figures.PODS}:{name}" if name else figures.PODS, Run([], {}), env)
                targets.append(t)
                t.pods = launch_containers(m, where, where, t.run, say=_say)
            yield targets
        finally:
            for t in targets:
                if t.run.teardown is not None:
                    t.run.teardown(hurry)
                stop_run(t.run)


def _dir(folder: Path, name: str) -> Path:
    path = folder / name
    path.mkdir(exist_ok=True)
    return path


def _counters(target: Target) -> dict[str, float]:
    texts = []
    for url in target.run.workers.get("decode", []):
        with _DIRECT.open(url + "/metrics", timeout=10) as resp:
            texts.append(resp.read().decode())
    return figures.counters(texts)


def request(target: Target, n: int) -> figures.Sample:
    """One streamed request of an ``n``-token prompt, and the READ counted around it."""
    before = _counters(target)
    body = {"prompt": _prompt(n), "max_tokens": MIN_TOKENS, "ignore_eos": True}
    got = stream_completion(target.run.proxy_url + "/v1/completions", body, timeout_s=300)
    return figures.sample(got.ttft_ms, got.ttlt_ms, before, _counters(target))


def _warm(targets: list[Target], lengths: list[int]) -> None:
    """The first handshake, and UCX's buffers for the largest request, before any timing."""
    for t in targets:
        get_json(t.run.proxy_url + "/v1/completions", {"prompt": "", "max_tokens": 1}, 120)
        request(t, max(lengths))


def interleaved(
    targets: list[Target], lengths: list[int], repeat: int, seconds: float
) -> tuple[dict[str, dict[int, list[figures.Sample]]], dict[str, list[dict[str, Any]]]]:
    """``repeat`` rounds; in each every length goes to every target, their order rotated,
    then each run of pods has its path measured: requests and limits see the same load."""
    _warm(targets, lengths)
    samples: dict[str, dict[int, list[figures.Sample]]] = {
        t.name: {n: [] for n in lengths} for t in targets
    }
    paths: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets if t.pods}
    for r in range(repeat):
        _say(f"round {r + 1}/{repeat}: prompts {lengths} to {len(targets)} runs, then iperf3")
        order = targets[r % len(targets) :] + targets[: r % len(targets)]
        for n in lengths:
            for t in order:
                samples[t.name][n].append(request(t, n))
        for t in order:
            if t.pods:
                paths[t.name].append(path_limits(t, seconds))
    return samples, paths


def path_limits(target: Target, seconds: float) -> dict[str, Any]:
    """iperf3's limits from the target's first prefill pod to its first decode pod."""
    assert target.pods is not None
    prefill = next(p for p in target.pods.pods if p.role == "prefill")
    decode = next(p for p in target.pods.pods if p.role == "decode")
    return iperf.limits(prefill.name, decode.name, decode.ip, seconds)


def bench(args: argparse.Namespace) -> dict[str, Any]:
    lengths = [int(x) for x in args.prompts.split(",")]
    with started(Path(args.manifest), args.ucx) as targets:
        samples, paths = interleaved(targets, lengths, args.repeat, args.iperf_seconds)
    limits = {name: figures.limits(measured) for name, measured in paths.items()}
    runs = {
        t.name: {"runtime": "podman" if t.pods else "process", "env": t.env}
        | ({"iperf3": limits[t.name]} if t.name in limits else {})
        for t in targets
    }
    return {
        "manifest": str(args.manifest),
        "repeat": args.repeat,
        "ttft": f"streamed, first of {MIN_TOKENS} tokens",
        "nixl": "bytes / (post + wire) of the request's READ, decode workers' counters",
        "iperf3": limits[figures.PODS],
        "runs": runs,
        "by_prompt": figures.by_prompt(samples, limits),
    }


def table(result: dict[str, Any]) -> str:
    rows = [
        "prompt  run                 TTFT ms (p10-p90)      KV bytes  NIXL ms (post)  "
        "NIXL GB/s  /iperf3 1  /iperf3 4",
    ]
    for n, row in result["by_prompt"].items():
        for name, c in row.items():
            if not isinstance(c, dict):
                continue
            t, share = c["ttft_ms"], ""
            if "nixl_vs_iperf3_single" in c:
                share = f"{c['nixl_vs_iperf3_single']:9.2f}  {c['nixl_vs_iperf3_multi']:9.2f}"
            read = c["nixl_post_ms"] + c["nixl_wire_ms"]
            rows.append(
                f"{n:>6}  {name:18} {t['median']:8.1f} ({t['p10']:6.1f}-{t['p90']:6.1f})  "
                f"{c['kv_bytes']:9d}  {read:6.2f} ({c['nixl_post_ms']:5.2f})  "
                f"{c['nixl_gbps']:9.3f}  {share}"
            )
    for name, run in result["runs"].items():
        if "iperf3" in run:
            i = run["iperf3"]
            rows.append(
                f"iperf3 {name}: {i['single_gbps']:.3f} GB/s one stream, "
                f"{i['multi_gbps']:.3f} GB/s {i['streams']} streams; env {run['env'] or '-'}"
            )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg bench pods",
        description=__doc__.split("\n")[0],
    )
    p.add_argument("--manifest", default=str(QUICKSTART), help="a reference-engine manifest")
    p.add_argument("--prompts", default="16,512,2048", help="prompt lengths in tokens")
    p.add_argument("--repeat", type=int, default=5, help="rounds of requests")
    p.add_argument(
        "--ucx",
        type=parse_variant,
        action="append",
        default=[],
        metavar="NAME:K=V,...",
        help="one more run of pods, both pools with this env (UCX_* settings, or "
        "DISAGG_TRANSFER_MODE=push to compare the prefill's push with decode's READ)",
    )
    p.add_argument(
        "--iperf-seconds", type=float, default=1.0, help="iperf3 time per figure and round"
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    names = [name for name, _ in args.ucx]
    if len(set(names)) < len(names):
        p.error("--ucx: each variant needs a name of its own")
    lacks = iperf.missing()
    if lacks:
        print(
            f"disagg bench pods: iperf3 between the pods needs {', '.join(lacks)}", file=sys.stderr
        )
        return 2
    result = bench(args)
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0
