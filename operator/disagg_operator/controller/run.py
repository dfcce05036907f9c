"""``disagg operator``: run the kopf operator, namespaced or cluster-wide.

I/O shell. Adds a liveness endpoint (``/healthz``, :mod:`.health`) and Prometheus metrics
on their own ports, quiet JSON logs by default. :func:`running` starts the same operator
inside the caller's event loop (integration tests and ``disagg bench operator`` use it).

    disagg operator [--namespace NS | --all-namespaces] [--health-port 8080]
                    [--metrics-port 9090] [--bind-address 0.0.0.0] [--resync-seconds 600]
                    [--canary-seconds 20] [--prometheus-url URL]
                    [--log-level warning] [--platforms-file PATH] [--canary-image IMAGE]
                    [--root-key-file PATH] [--leader-elect --lease-namespace NS ...]

``--leader-elect`` (:mod:`.leader`): wait as a standby until this process holds the Lease,
then start kopf; on a lost lease stop at once and exit 1 (the kubelet restarts the pod as
a fresh standby); on SIGTERM stop kopf, then release the lease.

``--root-key-file`` (or ``$DISAGG_ROOT_KEY_FILE``): the root key every deployment's
handshake key is derived from (keys.py); the chart mounts it from a Secret. Without one
the operator derives from a random key of its own process and says so in a warning.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import kopf

from disagg_contract import commandline
from disagg_operator.controller import handlers, health, metrics, options
from disagg_operator.controller.config import OperatorConfig, from_args
from disagg_operator.controller.election import leader
from disagg_operator.controller.rules import keys

LEVELS = ("debug", "info", "warning", "error")
# TransferPathReady follows a broken path within a canary probe period (T, 15 s by default)
# plus one canary (T) plus this: about 50 s, since decode readiness latches and no pod event
# says it. Each pass asks at most 8 canaries per deployment, 32 at a time.
CANARY_SECONDS = 20.0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg operator",
        description="Run the operator, namespaced or cluster-wide.",
    )
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        help="watch this namespace (repeatable; globs like 'team-*' work)",
    )
    scope.add_argument(
        "--all-namespaces",
        "-A",
        action="store_true",
        help="watch every namespace (the default when no --namespace is given)",
    )
    p.add_argument("--health-port", type=int, default=8080, help="liveness: GET /healthz")
    p.add_argument("--metrics-port", type=int, default=9090, help="Prometheus: GET /metrics")
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=600.0,
        help="sync every deployment this often, in case an event was missed (0: only on events)",
    )
    p.add_argument(
        "--canary-seconds",
        type=float,
        default=CANARY_SECONDS,
        help="ask the decode pods' transfer canaries for their verdicts this often and sync "
        "the deployments whose verdict changed (TransferPathReady; 0: only on syncs)",
    )
    p.add_argument(
        "--prometheus-url",
        default=None,
        help="the Prometheus the autoscaler asks for deployments whose spec.autoscaling "
        "names none (e.g. http://prometheus-operated.monitoring:9090)",
    )
    p.add_argument(
        "--bind-address", default="0.0.0.0", help="address of the health and metrics endpoints"
    )
    p.add_argument(
        "--log-level",
        choices=LEVELS,
        default="warning",
        help="operator log level (JSON lines on stderr); kopf itself stays at warning unless debug",
    )
    p.add_argument(
        "--root-key-file",
        default=os.environ.get("DISAGG_ROOT_KEY_FILE") or None,
        help="file holding the root key handshake keys are derived from (at least 32 bytes; "
        "default $DISAGG_ROOT_KEY_FILE; without one a random key per process)",
    )
    options.add_argument(p)
    leader.add_arguments(p)
    return p


def read_root_key(path: str | None) -> bytes | None:
    """The root key in ``path`` (surrounding whitespace stripped); None without a path.

    Raises ValueError naming the flag and the fix when the file is unreadable or too short."""
    if path is None:
        return None
    try:
        root = Path(path).read_bytes().strip()
    except OSError as e:
        raise ValueError(
            f"--root-key-file: cannot read {path!r} ({e.strerror}); mount the root key "
            "Secret there or leave the flag out"
        ) from e
    problem = keys.root_problem(root)
    if problem:
        raise ValueError(f"--root-key-file {path!r}: {problem}")
    return root


def configure_logging(level: str) -> None:
    """JSON lines; kopf's chatter only from warning up unless debugging."""
    kopf.configure(debug=level == "debug", quiet=level != "debug", log_format=kopf.LogFormat.JSON)
    logging.getLogger("disagg").setLevel(level.upper())
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


@contextlib.asynccontextmanager
async def running(
    config: OperatorConfig, *, elector: leader.Elector | None = None
) -> AsyncIterator[asyncio.Task[None]]:
    """Run the operator ``config`` describes in this event loop until the block exits.

    Yields the operator's task, which ends early on SIGINT/SIGTERM (kopf handles them).
    With ``elector``: first waits as a standby until it leads (kopf is not started before);
    the task ends with :class:`leader.LeaseLost` when the lease is lost, kopf already
    stopped; a normal exit stops kopf, then releases the lease."""
    async with contextlib.AsyncExitStack() as stack:
        renewing = await stack.enter_async_context(leader.leading(elector)) if elector else None
        stop, ready = asyncio.Event(), asyncio.Event()
        tasks = await kopf.spawn_tasks(
            registry=handlers.registry,
            clusterwide=not config.namespaces,
            namespaces=config.namespaces,
            standalone=True,
            stop_flag=stop,
            ready_flag=ready,
            memo=kopf.Memo(config=config),  # handlers read everything else from it
            liveness_endpoint=config.liveness_endpoint,
        )
        # kopf cancels every task it does not know at exit: spare the caller's tasks,
        # including the one that stops it (test frameworks tear down from a task created
        # later), and the supervisor below.
        ignored = set(asyncio.all_tasks())
        runner = asyncio.create_task(kopf.run_tasks(tasks, ignored=ignored))
        operator = runner
        if renewing is not None:
            operator = asyncio.create_task(_until_lost(runner, renewing, stop))
            ignored.add(operator)
        try:
            await _ready(ready, operator, config.ready_timeout)
            yield operator
        finally:
            current = asyncio.current_task()
            if current is not None:
                ignored.add(current)
            stop.set()
            await asyncio.wait_for(operator, 30)


async def _ready(ready: asyncio.Event, operator: asyncio.Task[None], timeout: float) -> None:
    """Until kopf is ready, or the operator ended first (then its task tells why)."""
    waiting = asyncio.ensure_future(ready.wait())
    done, _ = await asyncio.wait(
        {waiting, operator}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
    )
    waiting.cancel()
    if not done:
        raise TimeoutError(f"the operator was not ready within {timeout:g} s")


async def _until_lost(
    runner: asyncio.Task[None], renewing: asyncio.Task[None], stop: asyncio.Event
) -> None:
    """kopf's run, cut short the moment the lease is lost: never two leaders writing."""
    await asyncio.wait({runner, renewing}, return_when=asyncio.FIRST_COMPLETED)
    if not runner.done():
        stop.set()  # an intended stop: kopf then schedules no SIGKILL of its own
        runner.cancel()  # handlers in flight are cancelled at their next await
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        renewing.result()  # raises LeaseLost
    await runner


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    # Before logging, metrics or kopf: a bad platforms file stops the start (exit 2).
    settings = options.settings(args, "disagg operator")
    if settings is None:
        return 2
    registered = options.added_platforms(settings)
    try:
        root_key = read_root_key(args.root_key_file)
    except ValueError as e:
        print(f"disagg operator: {e}", file=sys.stderr)
        return 2
    election = leader.settings_from(args)
    problems = election.problems() if election else []
    if problems:
        print("\n".join(f"disagg operator: {p}" for p in problems), file=sys.stderr)
        return 2
    configure_logging(args.log_level)
    if registered:
        logging.getLogger("disagg").info("registered platforms: %s", ", ".join(registered))
    metrics.serve(args.metrics_port, args.bind_address)
    config = from_args(args, settings=settings, root_key=root_key)

    async def forever() -> int:
        # Until kopf installs its own (graceful) handlers, a signal stops a standby at once.
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)  # type: ignore[union-attr]
        elector = await leader.Elector.connect(None, election) if election else None
        probe = await health.serve(
            args.bind_address, args.health_port, lambda: elector.state if elector else "off"
        )
        try:
            async with running(config, elector=elector) as operator:
                await operator  # until SIGTERM/SIGINT, or the lease is lost
        except leader.LeaseLost:
            return 1  # logged by the elector; the kubelet restarts us as a standby
        except asyncio.CancelledError:
            return 0  # a signal while standing by
        finally:
            await probe.cleanup()
            if elector:
                await elector.close()
        return 0

    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(forever())
    return 0
