"""`disagg worker serve|drain|canary|probe|wire`: the in-pod worker's entry points.

I/O shell. ``serve`` reads :class:`WorkerConfig` from ``DISAGG_*`` env (what the operator
renders into the pod) with flags on top, starts the engine and transfer agent, serves HTTP
until SIGTERM, then closes the agent. ``drain`` is the pods' preStop: it waits until the
worker has nothing in flight (``disagg_worker.serve.drain``). ``probe`` is the
transfer-path self-check (``disagg_worker.transfer.probe``), imported only when asked for;
``wire`` the canary's wire peer and probe (``disagg_worker.transfer.wire``).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from typing import Any

from disagg_contract import commandline
from disagg_contract.config import ConfigError, WorkerConfig

# flag → WorkerConfig field; every flag overrides the DISAGG_* variable of the same name.
FLAGS: dict[str, tuple[str, type]] = {
    "--role": ("role", str),
    "--engine-id": ("engine_id", str),
    "--device": ("device", str),
    "--model": ("model", str),
    "--seed": ("seed", int),
    "--http-host": ("http_host", str),
    "--http-port": ("http_port", int),
    "--side-channel-port": ("side_channel_port", int),
    "--block-size": ("block_size", int),
    "--num-blocks": ("num_blocks", int),
    "--block-lease-s": ("block_lease_s", float),
    "--transfer-deadline-s": ("transfer_deadline_s", float),
    "--log-level": ("log_level", str),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg worker serve",
        description="Serve one prefill/decode/both worker. Settings come from DISAGG_* env "
        "(see WorkerConfig); flags override them. Port 0 binds any free port; the bound "
        'ports are printed as one JSON line {"event": "ready", ...} on stdout.',
    )
    for flag, (field, kind) in FLAGS.items():
        p.add_argument(flag, dest=field, type=kind, help=f"overrides DISAGG_{field.upper()}")
    return p


def serve_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        config = WorkerConfig.from_env(os.environ, vars(args))
    except ConfigError as e:
        print(f"disagg worker serve: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=config.log_level.upper(),
        format='{"ts": "%(asctime)s", "level": "%(levelname)s", "logger": "%(name)s", '
        '"msg": "%(message)s"}',
    )
    from disagg_worker.serve.process import keep_buffers_on_heap, limit_threads

    limit_threads()
    keep_buffers_on_heap()
    if config.node_rank > 0:  # a group's other pod: its ranks join rank 0's engine
        from disagg_worker.serve import members

        return members.run(config)
    try:
        broken = asyncio.run(_serve(config))
    except (ValueError, RuntimeError, OSError) as e:  # bad preset, NIXL set-up, port in use
        print(f"disagg worker serve: {e}", file=sys.stderr)
        return 1
    if broken:
        print(f"disagg worker serve: {broken}", file=sys.stderr)
        return 1
    return 0


async def _serve(config: WorkerConfig) -> str | None:
    """Serve until a signal; what broke the engine (a tensor-parallel rank died) or None."""
    from disagg_worker.serve.handlers import build_app, build_metrics_app
    from disagg_worker.serve.process import serve
    from disagg_worker.serve.server import Worker

    worker = Worker(config)
    worker.start()
    try:

        async def ready(port: int) -> dict[str, Any]:
            return {
                "role": config.role,
                "engine_id": config.engine_id,
                "side_channel_port": worker.side_channel_port,
            }

        also = {"metrics": (build_metrics_app(worker), config.metrics_port)}
        # a client that leaves cancels its request: the engine stops it at its next step
        # (serve.cancel), so no work is done for an answer nobody reads
        await serve(
            build_app(worker), config.http_host, config.http_port, ready,
            cancel_on_disconnect=True, also=also if config.metrics_port else None,
        )  # fmt: skip
    finally:
        worker.close()
    return worker.broken


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print("usage: disagg worker {serve,drain,canary,probe,wire} [options]")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "serve":
        return serve_main(rest)
    if command == "drain":
        from disagg_worker.serve import drain

        return drain.main(rest)
    if command == "canary":
        from disagg_worker.serve import canary

        return canary.main(rest)
    if command == "probe":
        try:
            probe = importlib.import_module("disagg_worker.transfer.probe")
        except ModuleNotFoundError as e:
            if e.name != "disagg_worker.transfer.probe":
                raise
            print("disagg worker probe: not part of this build", file=sys.stderr)
            return 2
        result: int = probe.main(rest)
        return result
    if command == "wire":
        from disagg_worker.transfer import wire

        return wire.main(rest)
    known = "serve, drain, canary, probe or wire"
    print(f"disagg worker: unknown command {command!r}; use {known}", file=sys.stderr)
    return 2
