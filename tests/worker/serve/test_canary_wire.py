"""The canary names the wire: its wire probe against a wire peer, with real NIXL between
real processes on this host.

UCX sees the peer as ``intra-node`` and reads over CMA with its defaults (shared memory, as
expected); with ``UCX_TLS=tcp`` forced on the canary's side it reads over tcp, and a canary
told to expect shared memory there says UnexpectedTransport naming both, and still passes
(the path works), on its ``--once`` line and, served, on the ``/verdict`` the operator
reads. The rules alone: what a probe's report gives, and when it is unexpected.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from typing import Any

from disagg_tools.local.children import disagg_argv, start_child, wait_ready
from disagg_worker.serve.rules.canary_verdict import Result, verdict
from disagg_worker.serve.rules.canary_wire import Wire, transport_problem, wire_fields, wire_from
from tests.worker.serve.conftest import Workers

TIMEOUT_S = 5.0
SHM = {"intra-node": ("shared-memory",), "inter-node": ("tcp",)}
CMA = Wire("intra-node", "shared-memory", "cma/memory zero-copy (intra-node)")
TCP = Wire("intra-node", "tcp", "tcp/lo software emulation (intra-node)")


def test_a_probe_report_gives_its_wire_only_when_it_read() -> None:
    report = {"ok": True, "scope": "intra-node", "wire": "tcp", "chose": TCP.chose}
    assert wire_from(report) == TCP
    assert wire_from({**report, "ok": False, "error": "the READ ended ERR"}) is None
    assert wire_from({**report, "scope": None}) is None  # UCX printed no READ


def test_a_wire_outside_the_expected_ones_is_unexpected_and_names_both() -> None:
    assert transport_problem(CMA, SHM) is None
    assert transport_problem(None, SHM) is None  # not probed
    assert transport_problem(TCP, {"inter-node": ("tcp",)}) is None  # nothing said for it
    problem = transport_problem(TCP, SHM)
    assert problem == (
        "UnexpectedTransport: UCX moved the wire probe's READ over tcp (tcp/lo software "
        "emulation (intra-node)) where the deployment expects shared-memory for an "
        "intra-node peer; check UCX_TLS and UCX_NET_DEVICES in both pools' env, the RDMA "
        "device, and whether the pods may share memory (docs/troubleshooting.md)"
    )
    # a passing canary over it still passes, and says so first
    slow = "SlowTransport: the KV moved at 0.1 GB/s"
    found = verdict(Result(10.0, 5.0, None, None, slow, wire=TCP, odd=problem), 11.0, 30.0)
    assert found.ready and found.reason.startswith(f"{problem}; {slow} (the last canary ")
    assert wire_fields(TCP, SHM) == {
        "wire": "tcp",
        "wire_scope": "intra-node",
        "wire_chose": TCP.chose,
        "wire_expected": {"intra-node": ["shared-memory"], "inter-node": ["tcp"]},
    }


def _peer(workers: Workers) -> int:
    argv = disagg_argv("worker", "wire", "peer", "--host", "127.0.0.1", "--port", "0")
    child = start_child("wire-peer", argv, workers._base, workers.log_dir)
    workers.children.append(child)
    return int(wait_ready(child, timeout_s=60)["http_port"])


def _once(argv: list[str], **env: str) -> dict[str, Any]:
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**os.environ, **env}
    )
    assert done.stdout.strip(), f"no verdict line (exit {done.returncode}): {done.stderr}"
    line: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert done.returncode == 0 and line["passed"] is True, (line, done.stderr)
    return line


def test_the_canary_names_the_wire_and_a_forced_tcp_is_unexpected(workers: Workers) -> None:
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
    port = _peer(workers)
    argv = disagg_argv(
        *("worker", "canary", "--prefill", pre.url, "--decode", dec.url, "--model", "tiny"),  # type: ignore[attr-defined]
        *("--once", "--timeout-s", str(TIMEOUT_S), "--wire-peer-port", str(port)),
        *("--expect-wire", "intra-node=shared-memory", "--expect-wire", "inter-node=tcp"),
    )
    line = _once(argv)
    assert (line["wire"], line["wire_scope"]) == ("shared-memory", "intra-node"), line
    assert line["wire_chose"].startswith("cma/") and line["transport"] is None, line
    assert line["wire_expected"] == {"intra-node": ["shared-memory"], "inter-node": ["tcp"]}

    line = _once(argv, UCX_TLS="tcp")
    assert (line["wire"], line["wire_scope"]) == ("tcp", "intra-node"), line
    assert line["problem"] is None and line["transport"].startswith(
        "UnexpectedTransport: UCX moved the wire probe's READ over tcp (tcp/"
    ), line
    assert "where the deployment expects shared-memory for an intra-node peer" in line["transport"]


def test_a_served_canary_says_unexpected_transport_on_verdict_and_stays_ready(
    workers: Workers,
) -> None:
    """The wire probe runs apart from the canaries (it never delays a readiness answer);
    its finding joins the verdict the operator reads once it lands."""
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
    port = _peer(workers)
    argv = disagg_argv(
        *("worker", "canary", "--prefill", pre.url, "--decode", dec.url, "--model", "tiny"),  # type: ignore[attr-defined]
        *("--host", "127.0.0.1", "--port", "0", "--timeout-s", str(TIMEOUT_S)),
        *("--interval-s", "1", "--fresh-s", "30", "--wire-peer-port", str(port)),
        *("--expect-wire", "intra-node=shared-memory"),
    )
    child = start_child("canary", argv, {**workers._base, "UCX_TLS": "tcp"}, workers.log_dir)
    workers.children.append(child)
    url = f"http://127.0.0.1:{wait_ready(child, timeout_s=60)['http_port']}"
    with urllib.request.urlopen(url + "/ready", timeout=TIMEOUT_S + 5) as resp:
        assert resp.status == 200  # the first pass latches, whatever the wire
    deadline, body = time.monotonic() + 60, {}
    while time.monotonic() < deadline and not str(body.get("reason")).startswith(
        "UnexpectedTransport"
    ):
        time.sleep(0.5)
        with urllib.request.urlopen(url + "/verdict", timeout=TIMEOUT_S + 5) as resp:
            body = json.load(resp)
    assert body["passing"] is True and body["latched"] is True, body
    assert body["reason"].startswith(
        "UnexpectedTransport: UCX moved the wire probe's READ over tcp"
    )
    assert (body["wire"], body["wire_scope"]) == ("tcp", "intra-node"), body
