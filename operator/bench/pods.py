"""`disagg bench pods`: the quickstart's P/D path as local processes and as pods of
containers, measured in one run.

Benchmark layer. The manifest (default examples/quickstart-cpu.yaml) runs twice: as local
processes (``disagg up``) and as podman pods (``disagg up --runtime podman``: each pod its
own network namespace, KV over UCX TCP between them). For each prompt length it reports
the P/D TTFT (a 1-token request through the proxy, median of ``--repeat``), the proxy's
hops and the NIXL READ (bytes, wire time, rate), and the containers/processes ratios.
The path's limit is measured in the same run: a plain TCP copy of the same bytes between
the two pods (a socket from the decode pod's engine container to the prefill pod's), so
``nixl_vs_tcp`` is the share of that path NIXL gets. Progress goes to stderr, figures to
stdout (``--json`` or a table).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from disagg_operator.local.podman.launch import launch_containers
from disagg_operator.local.podman.plan import container_name
from disagg_operator.local.podman.runtime import podman, podman_env
from disagg_operator.local.stack import Run, get_json, launch
from disagg_worker.serve.localrun import stop_children

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
TCP_PORT = 5999  # the copy's port inside the prefill pod
SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", %d)); s.listen(1); print("listening", flush=True)
for _ in range(int(sys.argv[1])):
    c, _ = s.accept(); head = b""
    while len(head) < 16:
        head += c.recv(16 - len(head))
    n = int(head); buf = bytearray(1 << 20)
    while n > 0:
        n -= c.recv_into(buf, min(len(buf), n))
    c.sendall(b"k"); c.close()
"""
CLIENT = """
import socket, sys, time
n = int(sys.argv[2]); data = bytes(1 << 20); out = []
for _ in range(int(sys.argv[3])):
    c = socket.create_connection((sys.argv[1], %d)); c.sendall(b"%%016d" %% n)
    t = time.perf_counter(); left = n
    while left > 0:
        left -= c.send(memoryview(data)[: min(len(data), left)])
    c.recv(1); out.append(time.perf_counter() - t); c.close()
print(min(out))
"""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _prompt(n: int) -> list[int]:
    return [1] + [(i * 37 + 11) % 256 for i in range(n - 1)]


def measure(proxy: str, lengths: list[int], repeat: int) -> list[dict[str, Any]]:
    url = proxy + "/v1/completions"
    get_json(url, {"prompt": "", "max_tokens": 1}, timeout=120)  # the first handshake
    cases = []
    for n in lengths:
        samples = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = get_json(url, {"prompt": _prompt(n), "max_tokens": 1}, timeout=120)
            samples.append((1e3 * (time.perf_counter() - t0), out["disagg"]))
        figures = [d for _, d in samples]
        med = {
            k: _median(figures, k) for k in ("transfer_ms", "transfer_wire_ms", "transfer_bytes")
        }
        hops = [d["proxy"] for d in figures]
        wire, nbytes = med["transfer_wire_ms"], med["transfer_bytes"]
        cases.append(
            {
                "prompt_tokens": n,
                "ttft_ms": statistics.median(t for t, _ in samples),
                "prefill_hop_ms": _median(hops, "prefill_hop_ms"),
                "decode_hop_ms": _median(hops, "decode_hop_ms"),
                "transfer_ms": med["transfer_ms"],
                "transfer_wire_ms": wire,
                "transfer_bytes": int(nbytes),
                "nixl_gbps": nbytes / wire / 1e6 if wire else 0.0,
            }
        )
    return cases


def _median(items: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(float(d.get(key, 0.0)) for d in items))


def tcp_between_pods(prefill: str, decode: str, ip: str, nbytes: int, repeat: int) -> float:
    """GB/s of a plain TCP copy of ``nbytes`` from decode's engine container to prefill's
    (best of ``repeat``)."""
    server = subprocess.Popen(
        ["podman", "exec", prefill, "python", "-c", SERVER % TCP_PORT, str(repeat)],
        stdout=subprocess.PIPE,
        text=True,
        env=podman_env(),
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # listening
        args = [ip, str(nbytes), str(repeat)]
        done = podman("exec", decode, "python", "-c", CLIENT % TCP_PORT, *args, timeout=120)
        return nbytes / float(done.stdout.strip()) / 1e9
    finally:
        server.kill()
        server.wait(10)


def run_one(runtime: str, manifest: Path, lengths: list[int], repeat: int) -> dict[str, Any]:
    run, hurry = Run([], {}), threading.Event()
    hurry.set()  # a benchmark does not wait for preStop hooks
    with tempfile.TemporaryDirectory(prefix="disagg-bench-pods-") as tmp:
        try:
            if runtime == "podman":
                pods = launch_containers(manifest, Path(tmp), Path(tmp), run, say=_say)
            else:
                launch(manifest, Path(tmp), Path(tmp), run, say=_say)
            _say(f"measuring {runtime} run: prompts {lengths}, {repeat} repeats")
            out: dict[str, Any] = {
                "runtime": runtime,
                "cases": measure(run.proxy_url, lengths, repeat),
            }
            if runtime == "podman":
                prefill, decode = pods.pods[0], pods.pods[-1]
                names = (
                    container_name(prefill, prefill.engine_container),
                    container_name(decode, decode.engine_container),
                )
                limits = {}
                for case in out["cases"]:
                    size = max(case["transfer_bytes"], 1 << 16)
                    limits[size] = tcp_between_pods(*names, prefill.ip, size, repeat)
                    case["tcp_gbps"] = limits[size]
                    case["nixl_vs_tcp"] = case["nixl_gbps"] / limits[size] if limits[size] else 0
                out["tcp_64mib_gbps"] = tcp_between_pods(*names, prefill.ip, 64 << 20, 3)
            return out
        finally:
            if run.teardown is not None:
                run.teardown(hurry)
            stop_children(run.children)


def table(result: dict[str, Any]) -> str:
    rows = [
        "prompt  runtime   TTFT ms  prefill hop  decode hop  NIXL ms (wire)  KV bytes  "
        "NIXL GB/s  TCP GB/s  NIXL/TCP",
    ]
    for n, pair in result["by_prompt"].items():
        for name in ("process", "podman"):
            c = pair[name]
            tcp = f"{c['tcp_gbps']:8.3f}  {c['nixl_vs_tcp']:8.2f}" if "tcp_gbps" in c else ""
            rows.append(
                f"{n:>6}  {name:8} {c['ttft_ms']:8.1f}  {c['prefill_hop_ms']:11.1f}  "
                f"{c['decode_hop_ms']:10.1f}  {c['transfer_ms']:6.2f} "
                f"({c['transfer_wire_ms']:5.2f})  {c['transfer_bytes']:8d}  "
                f"{c['nixl_gbps']:9.3f}  {tcp}"
            )
        rows.append(f"{'':6}  podman/process TTFT {pair['ttft_ratio']:.2f}x")
    rows.append(f"TCP between the pods, 64 MiB: {result['tcp_64mib_gbps']:.3f} GB/s")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="disagg bench pods", description=__doc__.split("\n")[0])
    p.add_argument("--manifest", default=str(QUICKSTART))
    p.add_argument("--prompts", default="16,512,2048", help="prompt lengths in tokens")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    lengths = [int(x) for x in args.prompts.split(",")]
    runs = {r: run_one(r, Path(args.manifest), lengths, args.repeat) for r in ("process", "podman")}
    by_prompt: dict[int, dict[str, Any]] = {}
    for n, proc, pod in zip(
        lengths, runs["process"]["cases"], runs["podman"]["cases"], strict=True
    ):
        ratio = pod["ttft_ms"] / proc["ttft_ms"] if proc["ttft_ms"] else 0.0
        by_prompt[n] = {"process": proc, "podman": pod, "ttft_ratio": ratio}
    result = {"by_prompt": by_prompt, "tcp_64mib_gbps": runs["podman"]["tcp_64mib_gbps"]}
    print(json.dumps(result, indent=2) if args.json else table(result))
    return 0
