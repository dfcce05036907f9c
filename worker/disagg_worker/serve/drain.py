"""`disagg worker drain`: wait, before SIGTERM, until the worker has nothing in flight.

The reference pods' ``lifecycle.preStop`` (rendered by the operator). Once a pod is
terminating it leaves its Service's endpoints, but its clients (the router, kube-proxy)
learn that only within ``--settle-s``: the worker serves on that long, then this polls its
own ``GET /debug/blocks`` (on its listen address) until no blocks are held for a decode,
none are used by a running request and none are waited for, or until ``--timeout-s``.
It exits 0 either way: a preStop that fails only adds an event, and the kubelet sends
SIGTERM next regardless. A worker that does not answer has nothing left to drain.

:func:`idle` is the pure test over one report; :func:`main` the polling loop (stdlib only,
so the hook starts fast).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from disagg_contract import commandline

DEFAULT_PORT = 8000


ANY = ("0.0.0.0", "::", "")  # listening everywhere: the loopback address reaches it


def idle(report: dict[str, Any]) -> bool:
    """No block held for a decode, none used by a request, no request waiting for blocks.
    A report without these keys is not understood, so it does not count as idle."""
    return report.get("held") == {} and report.get("used") == 0 and report.get("waiting") == 0


def _fetch(url: str) -> dict[str, Any] | None:
    """The worker's block report; None when nothing answers (the worker is gone)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            report: dict[str, Any] = json.load(resp)
            return report
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None


def wait_idle(
    fetch: Callable[[], dict[str, Any] | None],
    timeout_s: float,
    poll_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, dict[str, Any] | None]:
    """Poll until idle or gone (True) or ``timeout_s`` passed (False); the last report."""
    deadline = clock() + timeout_s
    while True:
        report = fetch()
        if report is None or idle(report):
            return True, report
        if clock() >= deadline:
            return False, report
        sleep(min(poll_s, max(0.0, deadline - clock())))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        formatter_class=commandline.HelpFormatter,
        prog="disagg worker drain",
        description="Wait until the worker on $DISAGG_HTTP_HOST:$DISAGG_HTTP_PORT (its own "
        "listen address; 127.0.0.1 for all interfaces) holds no KV blocks and runs no "
        "request (its /debug/blocks), or the timeout; exit 0 either way.",
    )
    p.add_argument(
        "--settle-s",
        type=float,
        default=0.0,
        help="serve on this long first: until the pod's endpoint clients have seen it leave",
    )
    p.add_argument("--timeout-s", type=float, required=True, help="then give up waiting after this")
    p.add_argument("--poll-s", type=float, default=1.0, help="seconds between polls")
    args = p.parse_args(argv)
    port = int(os.environ.get("DISAGG_HTTP_PORT") or DEFAULT_PORT)
    host = os.environ.get("DISAGG_HTTP_HOST") or "0.0.0.0"
    url = f"http://{'127.0.0.1' if host in ANY else host}:{port}/debug/blocks"
    time.sleep(max(0.0, args.settle_s))
    drained, report = wait_idle(lambda: _fetch(url), args.timeout_s, args.poll_s)
    if report is None:
        print(f"disagg worker drain: drained (nothing answers on port {port})", file=sys.stderr)
    elif drained:
        print("disagg worker drain: drained", file=sys.stderr)
    else:
        print(
            f"disagg worker drain: not drained after {args.timeout_s:g} s, stopping anyway: "
            f"{json.dumps(report, sort_keys=True)}",
            file=sys.stderr,
        )
    return 0
