"""Local processes for the tools: a pod's container as a child process in its own process
group, its log file, its ready line, stopping with no orphans, free ports, and a
tensor-parallel group's env on one host.

I/O layer. A child's stdout and stderr go to its log file, where the parent reads the
ready line (:data:`disagg_worker.serve.process.READY_EVENT`) the worker prints once it
serves; nothing pipes, so nothing blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from disagg_tools.local.engines import base as engines
from disagg_tools.local.rules.status import exit_text
from disagg_worker.serve.process import LOOPBACK, READY_EVENT, die_with_parent

KILL_WAIT_S = 5.0  # after SIGKILL: the kernel reaps it at once unless it is stuck in I/O
TAIL_BYTES = 64 << 10  # enough for any tail shown; a vLLM log grows to megabytes


@dataclass
class Child:
    """One supervised process, like a pod's container: its name, command, env and log file
    stay; :func:`spawn` replaces ``proc`` (a restart), so whoever holds the Child always
    sees the live process. ``log_start`` is where this process's output begins in the log
    (a restart appends, so the previous process's last lines stay readable)."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] = field(init=False)
    log_start: int = 0
    ready: dict[str, Any] = field(default_factory=dict)

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines the current (or just ended) process wrote."""
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                start = max(self.log_start, size - TAIL_BYTES)
                f.seek(start)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        kept = text.splitlines()
        if start > self.log_start and kept:
            kept = kept[1:]  # the first line was cut
        return "\n".join(kept[-lines:])


class ChildError(RuntimeError):
    """A child process exited or never became ready; the message holds its log tail."""


def start_child(name: str, argv: Sequence[str], env: Mapping[str, str], log_dir: Path) -> Child:
    """Start ``argv`` as a new :class:`Child` logging to ``log_dir/name.log`` (see spawn)."""
    child = Child(name, list(argv), dict(env), log_dir / f"{name}.log")
    child.log_path.write_bytes(b"")
    spawn(child)
    return child


def spawn(child: Child) -> None:
    """Start ``child``'s command (again) in a new session (own process group), stdout and
    stderr appended to its log, as a container runtime keeps both streams.

    Both go to the file, never a pipe: a pipe nobody reads after the ready line fills up and
    blocks the process, and what it held never reaches the log. Python runs unbuffered, as
    in the images (Dockerfile), so a killed process loses no written line."""
    with open(child.log_path, "ab") as log:
        child.log_start = log.tell()
        child.ready = {}
        child.proc = subprocess.Popen(
            child.argv,
            env={"PYTHONUNBUFFERED": "1", **child.env},
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )


def ready_line(child: Child) -> dict[str, Any] | None:
    """The ready line the current process wrote to its log, if it has (non-blocking)."""
    try:
        with open(child.log_path, "rb") as f:
            f.seek(child.log_start)
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict) and data.get("event") == READY_EVENT:
                child.ready = data
                return data
    return None


def wait_ready(child: Child, timeout_s: float) -> dict[str, Any]:
    """Block until the child logs its ready line; raise ChildError if it dies or hangs."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        data = ready_line(child)
        if data is not None:
            return data
        if child.proc.poll() is not None:
            raise ChildError(
                f"{child.name} {exit_text(child.proc.returncode)} before it was ready; "
                f"last log lines:\n{child.log_tail()}"
            )
        time.sleep(0.05)
    raise ChildError(f"{child.name} not ready after {timeout_s:.0f}s; log:\n{child.log_tail()}")


def stop_children(
    children: Sequence[Child], grace_s: float = 5.0, sig: signal.Signals = signal.SIGTERM
) -> None:
    """Send ``sig`` to every child's process group, wait up to ``grace_s``, then SIGKILL
    the rest."""
    for child in children:
        _signal_group(child.proc, sig)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            _signal_group(child.proc, signal.SIGKILL)
            # bounded: a wait that blocks on Popen's lock could hang forever if a signal
            # handler's exception left that lock taken (an unreaped zombie is harmless)
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.proc.wait(KILL_WAIT_S)
        # members of the group that outlived the leader
        _signal_group(child.proc, signal.SIGKILL)


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def port_free(port: int) -> bool:
    """Whether ``port`` can be bound on every address now."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_port_range(span: int, candidates: Iterator[int] | None = None) -> int:
    """The first base port from ``candidates`` (default: ports the OS picks) with the
    ``span`` ports from it free now: a group's rendezvous (its store, rank 0's answers, a
    command port per rank)."""
    while True:
        if candidates is None:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                base = int(probe.getsockname()[1])
        else:
            base = next(candidates)
        if 0 < base <= 65000 - span and all(port_free(p) for p in range(base, base + span)):
            return base


def loopback_group_env(nodes: int, node: int, port: int) -> dict[str, str]:
    """``DISAGG_*`` of pod ``node`` of a group of ``nodes`` pods on this host, rendezvous on
    ``port``: the first on 127.0.0.1, pod k's ranks listening on 127.0.0.(k+1) only (an
    address of their own, as a pod's IP)."""
    out = {
        "DISAGG_NODES": str(nodes),
        "DISAGG_NODE_RANK": str(node),
        "DISAGG_GROUP_PORT": str(port),
    }
    if node:
        out |= {
            "DISAGG_LEADER_ADDRESS": LOOPBACK,
            "DISAGG_SIDE_CHANNEL_HOST": f"127.0.0.{node + 1}",
        }
    return out


def disagg_argv(*args: str) -> list[str]:
    """The `disagg` command as this interpreter runs it (no reliance on PATH)."""
    return engines.disagg_argv(args)


@contextlib.contextmanager
def serve_in_thread(app: web.Application) -> Iterator[str]:
    """Serve an aiohttp app on a loopback port from a thread of its own; yields its URL."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()
