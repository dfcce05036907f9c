"""`disagg bench transfer|e2e|operator|faults|...`: a dispatcher over the benchmark scripts.

CLI layer. Each benchmark is imported only when asked for, so one runs with its own
dependencies alone: `disagg bench operator` needs the operator extra and kmock (the dev
extra), no torch or NIXL. Benchmarks ship in the `disagg` distribution, not in the images
(pyproject.toml's [tool.disagg.images]).
"""

from __future__ import annotations

import sys

from disagg_operator.cli import import_command

BENCHES = {
    "transfer": ("disagg_worker.bench.transfer", "NIXL block transfer between two processes"),
    "e2e": ("disagg_worker.bench.e2e", "TTFT and decode throughput, aggregated vs P/D"),
    "operator": ("disagg_operator.bench.operator", "reconcile latency against the emulator"),
    "e2e-routing": ("disagg_worker.bench.routing", "e2e --routing threshold: P/D vs decode alone"),
    "e2e-vllm": ("disagg_operator.bench.e2e_vllm", "e2e --engine vllm: real vLLM, agg vs P/D"),
    "faults": ("disagg_operator.bench.faults", "data path under faults and load on the quickstart"),
    "pods": ("disagg_operator.bench.pods", "the quickstart as processes vs podman pods"),
    "vllm-memory": ("disagg_operator.bench.vllm_memory", "a vLLM CPU engine's runtime memory"),
    "autoscale": ("disagg_operator.bench.autoscale.run", "SLO-driven P:D scaling on a fleet model"),
    "profile": (
        "disagg_operator.bench.autoscale.profile",
        "a pool's TTFT and ITL curves, measured",
    ),
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print("usage: disagg bench {transfer,e2e,operator,faults} [options]\n")
        for name, (_, text) in BENCHES.items():
            print(f"  {name:9} {text}")
        return 0 if argv else 2
    if argv[0] == "e2e" and any(a in ("--engine", "--engine=vllm") for a in argv[1:]):
        # real vLLM: the operator's rendered pods (disagg_operator.local), not the worker's
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
    module = import_command(f"bench {argv[0]}", entry[0])
    if module is None:
        return 2
    result: int = module.main(argv[1:])
    return result
