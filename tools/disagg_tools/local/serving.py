"""Engines serving in a local run: free ports, cores per engine, readiness, warm-up, and
the transfer figures an engine logs (vLLM's, for engines whose ``local.figures`` is
``engine-log``).

I/O layer of ``disagg up`` and the local kubelet (sockets, HTTP, log files). An engine that
prints no ready line and cannot bind port 0 and say which port it got (vLLM) gets ports
picked free here, and readiness is its ``/health`` answering 200 (after ~30 s of engine
start for vLLM on this kind of host), with a progress line while it loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from disagg_tools.local.children import Child, ChildError
from disagg_tools.local.rules.pods import LOCAL, UpError
from disagg_tools.local.rules.status import exit_text
from disagg_tools.vllm.rules import metrics

PROGRESS_S = 15.0


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PORT = 10000


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The first port the kernel hands to a bind to port 0 (Linux: 32768 by default)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int(path.read_text().split()[0])
    return 32768


def free_ports(low: int | None = None, lowest: int = LOWEST_PORT) -> Iterator[int]:
    """Ports free on 127.0.0.1 right now, each once, below the kernel's ephemeral range:
    a port picked by bind(0) and released is the kind a later bind(0) gets again, and
    vLLM's engine core binds its own sockets so while its API server has yet to take its
    port (seen: the engine core's socket on the API server's port, whose /health never
    answered). Random within the range, so two runs rarely try the same ports."""
    top = ephemeral_low() if low is None else low
    given: set[int] = set()
    rng = random.Random()
    while True:
        port = rng.randrange(lowest, top) if top > lowest else 0  # 0: the OS picks
        if port in given:
            continue
        with socket.socket() as s:
            try:
                s.bind((LOCAL, port))
            except OSError:
                continue  # taken: try another
            port = int(s.getsockname()[1])
        given.add(port)
        yield port


def host_cores() -> list[int]:
    """The cores this process may run on (its affinity mask), as a node would offer them."""
    return sorted(os.sched_getaffinity(0))


def healthy(url: str) -> bool:
    """Whether ``url/health`` answers 200 now (2 s at most)."""
    with (
        contextlib.suppress(urllib.error.URLError, OSError),
        urllib.request.urlopen(url + "/health", timeout=2) as resp,
    ):
        return bool(resp.status == 200)
    return False


def wait_healthy(child: Child, url: str, timeout_s: float, say: Callable[[str], None]) -> float:
    """Block until ``url/health`` answers 200; the seconds it took. Raises ChildError
    with the log tail when the process dies or the timeout passes."""
    t0 = time.monotonic()
    next_note = t0 + PROGRESS_S
    while True:
        if child.proc.poll() is not None:
            raise ChildError(
                f"{child.name} {exit_text(child.proc.returncode)} while starting; "
                f"last log lines:\n{child.log_tail(30)}"
            )
        if healthy(url):
            return time.monotonic() - t0
        now = time.monotonic()
        if now - t0 > timeout_s:
            raise ChildError(
                f"{child.name} not healthy after {timeout_s:.0f}s; log:\n{child.log_tail(30)}"
            )
        if now >= next_note:
            say(f"  ...     {child.name}: vLLM still loading ({now - t0:.0f} s)")
            next_note = now + PROGRESS_S
        time.sleep(0.5)


def _warm_request(url: str) -> float:
    """One small greedy completion to ``url``; milliseconds it took. HTTPError (the engine
    or proxy answered an error) propagates; no answer at all is an UpError."""
    body = json.dumps({"prompt": "warm-up", "max_tokens": 2, "temperature": 0}).encode()
    req = urllib.request.Request(
        url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    t0 = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            resp.read()
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError) as e:
        raise UpError(f"{url}: warm-up request failed: {e}") from None
    return 1e3 * (time.perf_counter() - t0)


def warm_up(url: str) -> float:
    """One plain (aggregated) completion straight to the engine; milliseconds it took.

    vLLM's CPU attention uses AMX tiles for bf16 on hosts that have them; when an engine's
    first forward pass is a decode step over KV read from prefill, its worker dies with
    SIGILL (measured with vLLM 0.32 on this host kind). Any ordinary request first avoids
    it (docs/vllm.md)."""
    try:
        return _warm_request(url)
    except urllib.error.HTTPError as e:
        raise UpError(f"{url}: warm-up request answered {e.code}") from None


def warm_pd(proxy: str, say: Callable[[str], None], attempts: int = 4) -> float:
    """One P/D request through the proxy, so the first NIXL handshake and connection are
    paid before any real request; milliseconds it took.

    vLLM gives a side-channel handshake 5 s (a zmq receive timeout) and fails the request
    when it runs out, which happens on a loaded 2-core host: the handshake then finishes in
    the background and the next request succeeds. So a failed attempt is retried, and
    said."""
    for attempt in range(1, attempts + 1):
        try:
            return _warm_request(proxy)
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            if attempt == attempts:
                raise UpError(f"P/D warm-up failed {attempts} times; last: {detail}") from None
            say(
                f"  P/D warm-up attempt {attempt} failed ({e.code}: first NIXL handshake "
                "under load?); retrying"
            )
            time.sleep(1.0)
    raise AssertionError("unreachable")


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def transfer_figures(log: Path, since: int, wait_s: float, expect: int = 1) -> dict[str, float]:
    """vLLM's own transfer figures logged after byte offset ``since`` of ``log``: waits up
    to ``wait_s`` for the stats intervals that cover ``expect`` transfers to be written."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            with open(log, "rb") as f:
                f.seek(since)
                lines = f.read().decode(errors="replace").splitlines()
        except OSError as e:
            raise UpError(f"cannot read {log}: {e}") from None
        figures = metrics.summarize(lines)
        done = figures[metrics.COUNT] + figures[metrics.FAILED] + figures[metrics.EXPIRED]
        if done >= expect or time.monotonic() > deadline:
            return figures
        time.sleep(0.5)
