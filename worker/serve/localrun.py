"""Local process plumbing shared by the worker server, the proxy, `disagg up` and the e2e
benchmark: serve an aiohttp app until a signal, announce readiness on one JSON line, and
run child processes in their own process groups so stopping them leaves no orphans.

I/O layer. A served app binds its port (0: any free one) and then prints
``{"event": "ready", ...}`` with the bound ports on stdout; parents read that line instead
of guessing free ports, so there is no pick-then-bind race.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from aiohttp import web

READY_EVENT = "ready"


async def serve(
    app: web.Application,
    host: str,
    port: int,
    ready: Callable[[int], Awaitable[dict[str, Any]]],
) -> None:
    """Serve ``app`` until SIGINT/SIGTERM; ``ready(bound_port)`` gives the ready line's data."""
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = int(runner.addresses[0][1])
        info = {"event": READY_EVENT, "http_port": bound, **await ready(bound)}
        print(json.dumps(info), flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


@dataclass
class Child:
    """One started process: its name, the ready line it printed, its log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    ready: dict[str, Any] = field(default_factory=dict)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class ChildError(RuntimeError):
    """A child process exited or never became ready; the message holds its log tail."""


def start_child(
    name: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    log_dir: Path,
    *,
    stdout_to_log: bool = False,
) -> Child:
    """Start ``argv`` in a new session (own process group); stdout is a pipe for the ready
    line (or, with ``stdout_to_log``, for programs that print no ready line, the log too),
    stderr goes to ``log_dir/name.log``."""
    log_path = log_dir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            list(argv),
            env=dict(env),
            stdout=log if stdout_to_log else subprocess.PIPE,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    return Child(name, proc, log_path)


def _die_with_parent() -> None:
    """In the child: get SIGTERM when the parent dies, even by SIGKILL (Linux), so a
    crashed `disagg up` or test cannot leave workers behind."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def wait_ready(child: Child, timeout_s: float) -> dict[str, Any]:
    """Block until the child prints its ready line; raise ChildError if it dies or hangs."""
    assert child.proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    stream: IO[bytes] = child.proc.stdout
    os.set_blocking(stream.fileno(), False)
    buf = b""
    while time.monotonic() < deadline:
        chunk = stream.read() or b""
        buf += chunk
        for line in buf.splitlines():
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and data.get("event") == READY_EVENT:
                    child.ready = data
                    return data
        if child.proc.poll() is not None:
            raise ChildError(
                f"{child.name} exited with code {child.proc.returncode} before it was "
                f"ready; last log lines:\n{child.log_tail()}"
            )
        time.sleep(0.05)
    raise ChildError(f"{child.name} not ready after {timeout_s:.0f}s; log:\n{child.log_tail()}")


def stop_children(children: Sequence[Child], grace_s: float = 5.0) -> None:
    """SIGTERM every child's process group, wait up to ``grace_s``, then SIGKILL the rest."""
    for child in children:
        _signal_group(child.proc, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.proc.wait(max(deadline - time.monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            _signal_group(child.proc, signal.SIGKILL)
            child.proc.wait()
        # members of the group that outlived the leader
        _signal_group(child.proc, signal.SIGKILL)
        if child.proc.stdout is not None:
            child.proc.stdout.close()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def disagg_argv(*args: str) -> list[str]:
    """The `disagg` command as this interpreter runs it (no reliance on PATH)."""
    return [sys.executable, "-m", "disagg_operator.cli", *args]
