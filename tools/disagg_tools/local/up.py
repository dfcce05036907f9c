"""`disagg up FILE`: run a DisaggregatedDeployment on this machine, no cluster needed.

CLI layer. The manifest goes through the operator's own :func:`render` — the very pods a
cluster would get — and its pods run on a local kubelet of the run's own
(:mod:`disagg_tools.local.stack`): every container as a local process at the pod's
address, adapted for one host as the kubelet adapts it (this command prints each change),
Ready when its probes say so, restarted with back-off when it dies while the others serve
on. Both engines run: the reference engine (``disagg worker serve``) and real vLLM
(``vllm serve``, with the ``vllm`` extra installed). The P/D proxy runs in front, a pod on
this host's network. Ctrl-C, SIGTERM, or any error while starting stops every pod.

``--runtime podman`` runs the same rendered pods as pods of containers from their images
instead (:mod:`disagg_tools.local.podman`): each with its own IP, network and PID
namespace, securityContext, volumes, limits and probes; stopping runs their preStop hooks
and removes every container, pod, volume and network the run made.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from disagg_contract import commandline
from disagg_tools.local import preflight, serving
from disagg_tools.local.children import ChildError
from disagg_tools.local.podman.launch import launch_containers, teardown_note
from disagg_tools.local.podman.launch import supervisor as supervisor_of
from disagg_tools.local.podman.runtime import PodRuntime
from disagg_tools.local.rules.pods import UpError, local_pods
from disagg_tools.local.stack import Run, get_json, launch, stop_run, watch
from disagg_tools.vllm.rules import metrics
from disagg_worker.serve.rules.timings import ProxyFigures, Timings

__all__ = ["UpError", "figures", "local_pods", "main"]


def _say(message: str) -> None:
    print(message, flush=True)


class _Stop(Exception):
    """SIGINT or SIGTERM arrived while starting: unwind through the cleanup."""


class _Signals:
    """SIGINT and SIGTERM handler. While the run starts (minutes, with vLLM) a signal raises
    :class:`_Stop` so start-up stops at once; once it serves, a signal only sets ``stop``
    and the supervision loop returns: an exception raised at an arbitrary point can land
    inside ``Popen.poll`` between taking and releasing its lock, and the cleanup's wait on
    that process would then block for good. While the run stops, a signal sets ``hurry``:
    the stop skips what is left of its waits (preStop hooks, grace periods) but still
    removes everything."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.hurry = threading.Event()
        self.raising = True
        self.stopping = False

    def __call__(self, signum: int, frame: Any) -> None:
        if self.stopping:
            self.hurry.set()
            return
        self.stop.set()
        if self.raising:
            raise _Stop


def _ask(run: Run, prompt: str, max_tokens: int) -> None:
    if run.local is not None and run.local.figures == "engine-log":
        _ask_vllm(run, prompt, max_tokens)
        return
    url = run.proxy_url + "/v1/completions"
    warm = get_json(url, {"prompt": "", "max_tokens": 1}, timeout=120).get("disagg", {})
    if warm.get("proxy", {}).get("path") == "decode":
        _say("\nwarm-up request: decode alone (the manifest's routing policy), no transfer")
    else:
        _say(
            f"\nwarm-up request: its transfer took {warm.get('transfer_ms', 0):.1f} ms (the "
            "first handshake and NIXL connection are paid once per prefill/decode pair)"
        )
    out = get_json(url, {"prompt": prompt, "max_tokens": max_tokens}, timeout=120)
    _say(f"\nprompt:     {prompt!r}\ncompletion: {out['choices'][0]['text']!r}")
    _say(f"tokens:     {out['choices'][0].get('token_ids')}")
    _say("            (seeded random weights: noise by design, the same as one process gives)")
    for line in figures(out.get("disagg", {})):
        _say(line)


def _tails(run: Run, message: str, kept: bool) -> str:
    """The last log lines of every worker the error message names; a log's path only when
    it outlives the run (``kept``: --log-dir), never one the run's exit removes."""
    out = []
    for url, name in run.names.items():
        if url in message and name in run.engines:
            child = run.engines[name]
            where = str(child.log_path) if kept else "removed at exit; --log-dir DIR keeps it"
            out.append(f"\n--- last lines of {name}'s log ({where}):\n{child.log_tail(25)}")
    return "".join(out)


def _ask_vllm(run: Run, prompt: str, max_tokens: int) -> None:
    """One greedy request through the proxy; vLLM's own transfer figures from decode's log."""
    url = run.proxy_url + "/v1/completions"
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    decode_log = run.logs[run.names[run.workers["decode"][0]]]
    since = serving.log_size(decode_log)
    t0 = time.perf_counter()
    out = get_json(url, {**body, "return_token_ids": True}, timeout=300)
    took = 1e3 * (time.perf_counter() - t0)
    choice = out["choices"][0]
    _say(f"\nprompt:     {prompt!r}\ncompletion: {choice['text']!r}")
    _say(f"tokens:     {choice.get('token_ids')}")
    _say("            (tiny seeded random Llama: noise by design, the same as aggregated vLLM)")
    proxy = out.get("disagg", {}).get("proxy", {})
    _say(
        f"request:    {took:.0f} ms through the proxy (prefill hop "
        f"{proxy.get('prefill_hop_ms', 0):.0f} ms, "
        f"decode hop {proxy.get('decode_hop_ms', 0):.0f} ms)"
    )
    _say("transfer:   waiting for vLLM's stats interval (up to 15 s) ...")
    f = serving.transfer_figures(decode_log, since, wait_s=15.0)
    count = int(f[metrics.COUNT])
    _say(
        f"transfer:   vLLM (decode) reports {count} NIXL transfer(s), "
        f"{f['Avg MB per transfer'] * 1e3:.0f} kB in {f['Avg number of descriptors']:.0f} "
        f"descriptors, {f['Avg xfer time (ms)']:.3f} ms each, "
        f"{int(f[metrics.FAILED])} failed"
    )
    _say("            (vLLM's 10 s stats interval: the warm-up's transfers may be counted too)")


def figures(wire: dict[str, Any]) -> Iterator[str]:
    """An answer's ``disagg`` object (:class:`Timings`) as ``disagg up`` prints it."""
    d = Timings.from_wire(wire)
    proxy, pre = d.proxy or ProxyFigures(), d.prefill or Timings()
    alone = proxy.path == "decode"
    if proxy.prompt_tokens is not None:  # the routing policy counted the prompt
        where = "decode alone" if alone else "prefill, then decode"
        held = proxy.cached_tokens or 0
        held_text = f", {held} of them held on decode" if held else ""
        reason = proxy.route_reason
        yield f"route:      {where} ({reason}: {proxy.prompt_tokens} prompt tokens{held_text})"
    if alone:
        rest = d.decode_ms or 0
        yield f"decode:     {d.engine_id}: the prompt, then {rest:.1f} ms for the rest"
        yield f"proxy hops: decode {proxy.decode_hop_ms or 0:.1f} ms"
        return
    compute = (pre.prompt_ms or 0) + (pre.first_step_ms or 0)
    yield f"prefill:    {pre.engine_id} computed the prompt in {compute:.1f} ms"
    if d.transfer_ms is not None:
        nbytes, wire_ms = d.transfer_bytes or 0, d.transfer_wire_ms or 0
        rate = f" ({nbytes / wire_ms / 1e3:.0f} MB/s)" if wire_ms else ""
        how = "push (the prefill's WRITE) of" if d.transfer_pushed else "READ"
        yield (
            f"transfer:   NIXL {how} {int(nbytes)} bytes in "
            f"{int(d.transfer_descriptors or 0)} descriptor(s): {wire_ms:.3f} ms on the "
            f"wire{rate}, {d.transfer_ms:.2f} ms in all"
        )
        if d.transfer_handshake_ms:
            yield (
                "            incl. the first handshake with this prefill: "
                f"{d.transfer_handshake_ms:.1f} ms"
            )
    first = d.first_step_ms or 0
    given = first < 0.05  # no forward pass: the prefill's first token was taken
    start = "first token as the prefill computed it" if given else f"first step {first:.1f} ms"
    yield (f"decode:     {d.engine_id}: {start}, then {d.decode_ms or 0:.1f} ms for the rest")
    yield (
        f"proxy hops: prefill {proxy.prefill_hop_ms or 0:.1f} ms, decode "
        f"{proxy.decode_hop_ms or 0:.1f} ms, total {proxy.total_ms or 0:.1f} ms"
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="disagg up",
        description="Run a DisaggregatedDeployment on this machine: the operator's rendered "
        "pods (reference engine or vLLM) as local processes with real NIXL transfers, behind "
        "a P/D proxy. Ctrl-C stops everything.",
        formatter_class=commandline.HelpFormatter,
    )
    commandline.add_manifest_arguments(p, "manifest with one DisaggregatedDeployment", many=False)
    p.add_argument("--prompt", help="send one request, print the result, then stop")
    p.add_argument("--max-tokens", type=int, default=16, help="tokens to generate for --prompt")
    p.add_argument("--port", type=int, default=8080, help="proxy port (0: any free port)")
    p.add_argument(
        "--keep-cpu-binding",
        action="store_true",
        help="vLLM: keep the rendered CPU binding (nobind + OMP_NUM_THREADS, what pods on a "
        "shared node run) instead of giving each engine its own cores on this host",
    )
    p.add_argument(
        "--log-dir",
        help="keep each process's log here (default: a temp folder, removed at exit; the "
        "failing process's last lines are printed either way)",
    )
    p.add_argument(
        "--model",
        help="run with this local model instead of spec.model (e.g. a directory written by "
        "`disagg model tiny-llama DIR`); the pods are rendered with it",
    )
    p.add_argument(
        "--runtime",
        choices=("process", "podman"),
        default="process",
        help="process: each pod's engine as a local process (default); podman: each pod "
        "as a pod of containers from its image, with its own network and PID namespace "
        "(`make images` builds the images)",
    )
    p.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="RENDERED=LOCAL",
        type=_image,
        help="podman: run image LOCAL where the pods name RENDERED (default: the image "
        "itself if built here, else the local build that stands for it); repeatable",
    )
    p.add_argument(
        "--claim",
        action="append",
        default=[],
        metavar="NAME=DIR",
        type=_claim,
        help="the local folder standing for PersistentVolumeClaim NAME (a pvc://NAME/path "
        "model is read from DIR/path); repeatable",
    )
    return p


def _image(text: str) -> tuple[str, str]:
    rendered, sep, local = text.partition("=")
    if not sep or not rendered or not local:
        raise argparse.ArgumentTypeError(f"{text!r}: write RENDERED=LOCAL")
    return rendered, local


def _claim(text: str) -> tuple[str, str]:
    name, sep, folder = text.partition("=")
    if not sep or not name or not Path(folder).is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: write NAME=DIR with DIR an existing folder")
    return name, str(Path(folder).resolve())


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    args.file = commandline.manifest_paths(parser, args, many=False)[0]
    # what a started run would meet late (a busy port, a missing extra, ...), said at once
    found: list[preflight.Problem | str] = [
        *_other_runtimes_options(args),
        *preflight.check_file(args.file, port=args.port, runtime=args.runtime),
    ]
    if found:
        preflight.fail(found)
    signals = _Signals()
    previous = signal.signal(signal.SIGTERM, signals)
    # a shell starts background jobs with SIGINT ignored (inherited): Ctrl-C must still work
    previous_int = signal.signal(signal.SIGINT, signals)
    run = Run([], {})
    try:
        with tempfile.TemporaryDirectory(prefix="disagg-up-") as tmp:
            try:
                logs = Path(args.log_dir) if args.log_dir else Path(tmp)
                logs.mkdir(parents=True, exist_ok=True)
                return _run(args, Path(tmp), logs, run, signals)
            finally:
                signals.raising, signals.stopping = False, True
                _stop(run, signals.hurry)
    except (UpError, ChildError, OSError) as e:
        print(f"disagg up: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _other_runtimes_options(args: argparse.Namespace) -> list[str]:
    if args.runtime == "podman" and args.keep_cpu_binding:
        return ["--keep-cpu-binding is for process runs: containers keep it anyway"]
    if args.runtime == "process" and args.image:
        return ["--image names images for --runtime podman; a process run uses none"]
    return []


def _stop(run: Run, hurry: threading.Event) -> None:
    """Stop what the run started: a podman run's containers (preStop hooks, grace
    periods) and every object it made, or the local kubelet's pods (their preStop hooks
    and grace, as a namespace's deletion), then the processes."""
    if run.teardown is not None:
        left = run.teardown(hurry)
        _say(teardown_note(left))
    stop_run(run, graceful=True, hurry=hurry)
    if run.children:
        _say(f"stopped {len(run.children)} processes")


def _run(args: argparse.Namespace, tmp: Path, logs: Path, run: Run, signals: _Signals) -> int:
    runtime: PodRuntime | None = None
    if args.runtime == "podman":
        runtime = launch_containers(
            Path(args.file),
            tmp,
            logs,
            run,
            port=args.port,
            model=args.model,
            claims=dict(args.claim),
            images=dict(args.image),
            say=_say,
        )
    else:
        launch(
            Path(args.file),
            tmp,
            logs,
            run,
            port=args.port,
            model=args.model,
            keep_cpu_binding=args.keep_cpu_binding,
            claims=dict(args.claim),
            say=_say,
        )
    _say(f"\nendpoint: {run.proxy_url}/v1/completions")
    if args.prompt is not None:
        try:
            _ask(run, args.prompt, args.max_tokens)
        except UpError as e:
            raise UpError(f"{e}{_tails(run, str(e), args.log_dir is not None)}") from None
        return 0
    _say(
        f'try: curl -s {run.proxy_url}/v1/completions -d \'{{"prompt": "Hello", '
        '"max_tokens": 16}\'\nCtrl-C stops everything'
    )
    signals.raising = False
    if signals.stop.is_set():  # a signal may have come just before
        return 130
    if runtime is None:
        watch(run, signals.stop, _say)
    else:
        supervisor_of(run, runtime, _say).watch(signals.stop)
    return 130
