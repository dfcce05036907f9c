"""`disagg worker drain` (the reference pods' preStop) against real worker processes: it
returns once the worker holds no blocks and runs nothing, or at its timeout, exit 0 both."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import time

from disagg_tools.local.children import disagg_argv
from disagg_worker.model.model import BOS
from tests.worker.serve.conftest import StartWorker, get, post


def _drain_argv(url: str, timeout_s: float, *more: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "DISAGG_HTTP_PORT": url.rsplit(":", 1)[1]}
    argv = disagg_argv("worker", "drain", "--timeout-s", str(timeout_s), "--poll-s", "0.1")
    return [*argv, *more], env


def _drain(url: str, timeout_s: float) -> tuple[subprocess.CompletedProcess[str], float]:
    argv, env = _drain_argv(url, timeout_s)
    t0 = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - t0


def _hold(url: str) -> None:
    """A prefill whose decode never comes: its blocks stay held until the lease ends."""
    rng = random.Random(5)
    prompt = [BOS] + [rng.randrange(256) for _ in range(39)]
    body = {"prompt": prompt, "max_tokens": 1, "kv_transfer_params": {"do_remote_decode": True}}
    status, out = post(url + "/v1/completions", body)
    assert status == 200, out
    assert get(url + "/debug/blocks")["held"]


def test_an_idle_worker_drains_at_once(start_worker: StartWorker) -> None:
    worker = start_worker("prefill")
    done, _ = _drain(worker.url, 30)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().endswith("disagg worker drain: drained")  # not its timeout


def test_work_sent_while_the_pod_settles_is_served_and_then_drained(
    start_worker: StartWorker,
) -> None:
    """A router that has not yet seen the pod leave sends it a prefill during the settle:
    the worker answers it, and the drain then waits for its blocks (without the settle an
    idle worker drains at once, and the request would meet a stopping server)."""
    worker = start_worker("prefill", block_lease_s=3, transfer_deadline_s=1)
    argv, env = _drain_argv(worker.url, 60, "--settle-s", "2")
    t0 = time.monotonic()
    drain = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE, text=True)
    try:
        _hold(worker.url)  # sent as the pod settles
        assert drain.poll() is None  # still settling
        _, err = drain.communicate(timeout=60)
    finally:
        drain.kill()
    took = time.monotonic() - t0
    assert drain.returncode == 0 and err.strip().endswith("disagg worker drain: drained"), err
    assert took > 3, took  # the held blocks' lease (3 s), not only the settle (2 s)
    report = get(worker.url + "/debug/blocks")
    assert report["held"] == {} and report["used"] == 0


def test_drain_waits_for_held_blocks_to_be_freed(start_worker: StartWorker) -> None:
    worker = start_worker("prefill", block_lease_s=4, transfer_deadline_s=1)
    _hold(worker.url)
    done, took = _drain(worker.url, 60)
    assert done.returncode == 0, done.stderr
    assert took > 2, took  # it waited for the lease to free the blocks ...
    assert done.stderr.strip().endswith("disagg worker drain: drained")  # ... not 60 s
    report = get(worker.url + "/debug/blocks")
    assert report["held"] == {} and report["used"] == 0


def test_drain_gives_up_at_its_timeout_and_still_exits_0(start_worker: StartWorker) -> None:
    worker = start_worker("prefill", block_lease_s=60, transfer_deadline_s=1)
    _hold(worker.url)
    done, took = _drain(worker.url, 1.5)
    assert done.returncode == 0, done.stderr
    assert took > 1, took  # it waited for its timeout (the lease is 60 s) ...
    assert "not drained after 1.5 s" in done.stderr and "held" in done.stderr  # ... then gave up


def test_drain_of_a_worker_that_is_gone_exits_0() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    done, _ = _drain(f"http://127.0.0.1:{port}", 30)
    assert done.returncode == 0, done.stderr
    assert f"drained (nothing answers on port {port})" in done.stderr  # not its timeout
