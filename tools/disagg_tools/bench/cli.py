"""`disagg bench transfer|e2e|operator|faults|...`: a dispatcher over the benchmark scripts.

CLI layer. Each benchmark is imported only when asked for, so one runs with its own
dependencies alone: `disagg bench operator` needs the operator extra and the tools' (kmock),
no torch or NIXL. A tool of the disagg-tools distribution: no image installs it.
"""

from __future__ import annotations

import importlib
import sys

BENCHES = {
    "transfer": ("disagg_tools.bench.transfer", "NIXL block transfer between two processes"),
    "e2e": ("disagg_tools.bench.e2e", "TTFT and decode throughput, aggregated vs P/D"),
    "operator": ("disagg_tools.bench.operator", "reconcile latency against the emulator"),
    "e2e-routing": ("disagg_tools.bench.routing", "e2e --routing threshold: P/D vs decode alone"),
    "e2e-vllm": ("disagg_tools.bench.e2e_vllm", "e2e --engine vllm: real vLLM, agg vs P/D"),
    "faults": ("disagg_tools.bench.faults", "data path under faults and load on the quickstart"),
    "flood": ("disagg_tools.bench.flood", "the quickstart flooded: shedding, cancels, recovery"),
    "pods": ("disagg_tools.bench.pods", "the quickstart as processes vs podman pods"),
    "prefix": ("disagg_tools.bench.prefix", "vLLM prefix index: KV events vs approximate"),
    "vllm-memory": ("disagg_tools.bench.vllm_memory", "a vLLM CPU engine's runtime memory"),
    "autoscale": ("disagg_tools.bench.autoscale.run", "SLO-driven P:D scaling on a fleet model"),
    "profile": (
        "disagg_tools.bench.autoscale.profile",
        "a pool's TTFT and ITL curves, measured",
    ),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(f"usage: disagg bench {{{','.join(BENCHES)}}} [options]\n")
        for name, (_, text) in BENCHES.items():
            print(f"  {name:11} {text}")
        return 0 if argv else 2
    if argv[0] == "e2e" and any(a in ("--engine", "--engine=vllm") for a in argv[1:]):
        # real vLLM: the operator's rendered pods (disagg_tools.local), not the worker's
        # engine
        argv = ["e2e-vllm", *argv[1:]]
    elif argv[0] == "e2e" and any(a.startswith("--routing") for a in argv[1:]):
        argv = ["e2e-routing", *argv[1:]]
    entry = BENCHES.get(argv[0])
    if entry is None:
        print(
            f"disagg bench: unknown benchmark {argv[0]!r}; one of {', '.join(BENCHES)}",
            file=sys.stderr,
        )
        return 2
    try:
        module = importlib.import_module(entry[0])
    except ModuleNotFoundError as e:
        print(f"disagg bench {argv[0]}: missing dependency {e.name!r}", file=sys.stderr)
        return 2
    result: int = module.main(argv[1:])
    return result
