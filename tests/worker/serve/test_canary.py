"""`disagg worker canary` against real reference workers on loopback.

Readiness latches: /ready is 200 from the first canary that passes on the decode's engine
and stays 200 while the prefill is frozen (its queue never answers: PrefillBusy) and
after it is killed (PrefillUnreachable); /verdict says those within a few canaries, and
passes again when the prefill recovers. A restarted decode engine (another process on the
same port) makes /ready 503 until a canary passes on it, after a warm-up of its own.
`--once` says the verdict as an exit code; a bandwidth floor above what loopback moves says
SlowTransport and still passes (a slow path serves).

"Within a few canaries" is read off the canary's own answers and log, not the test's clock:
each failing verdict names its hop and reason, and the flip lines say how long it took."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from disagg_tools.local.children import Child, disagg_argv, start_child, wait_ready
from tests.worker.serve.conftest import Workers

TIMEOUT_S, INTERVAL_S = 5.0, 1.0
HANG_S = 60.0  # only guards a hang: past --fresh-s (30) a canary that never ran again says so


def _get(url: str, page: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url + page, timeout=TIMEOUT_S + 5) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def _ready(url: str) -> tuple[int, dict[str, Any]]:
    """The readiness probe's answer."""
    return _get(url, "/ready")


def _pair(workers: Workers) -> tuple[Child, Child]:
    """A prefill and a decode reference worker, both ready (started side by side)."""
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
    return pre, dec


def _canary(workers: Workers, prefill: str, decode: str, *extra: str) -> str:
    argv = disagg_argv(
        *("worker", "canary", "--prefill", prefill, "--decode", decode, "--model", "tiny"),
        *("--host", "127.0.0.1", "--port", "0", "--timeout-s", str(TIMEOUT_S)),
        *("--interval-s", str(INTERVAL_S), "--fresh-s", "30", *extra),
    )
    child = start_child("canary", argv, workers._base, workers.log_dir)
    workers.children.append(child)
    return f"http://127.0.0.1:{wait_ready(child, timeout_s=60)['http_port']}"


def _requests(url: str, kind: str = "") -> float:
    """Completion requests a worker has served (its /metrics ``disagg_requests_total``), of
    one kind (prefill, decode, or a whole "completion") when given."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("disagg_requests_total") and (not kind or f'kind="{kind}"' in line)
    )


def _url(child: Child) -> str:
    return str(child.url)  # type: ignore[attr-defined]


def _verdict_until(url: str, status: int, word: str = "") -> tuple[list[int], dict[str, Any]]:
    """Probe /ready and /verdict in turn until /verdict answers ``status`` (and its reason
    holds ``word``): every /ready status on the way, and that /verdict's body."""
    readiness: list[int] = []
    deadline = time.monotonic() + HANG_S
    while True:
        readiness.append(_get(url, "/ready")[0])
        code, body = _get(url, "/verdict")
        if code == status and word in body["reason"]:
            return readiness, body
        assert time.monotonic() < deadline, f"/verdict still {code} {body} after {HANG_S} s"
        time.sleep(0.2)


def test_readiness_latches_while_the_verdict_follows_a_frozen_then_dead_prefill(
    workers: Workers,
) -> None:
    pre, dec = _pair(workers)
    url = _canary(workers, _url(pre), _url(dec))
    canary = workers.children[-1]
    status, body = _ready(url)
    assert status == 200, body
    assert body["ready"] is True and body["latched"] is True and body["prefill"] == _url(pre)
    assert body["engine"].startswith(f"pid {dec.proc.pid} started "), body
    # the KV the canary's decode read, as the reference worker answered it
    assert body["kv_bytes"] > 0 and body["kv_measured_from"] == "answer"
    assert body["kv_bandwidth"] == "not checked: no floor"
    # before its first P/D request the canary warmed decode's engine with one plain
    # completion (vLLM CPU on AMX dies when its first forward pass is over remote KV)
    assert _requests(_url(dec), "completion") == 1 and _requests(_url(dec), "decode") >= 1

    # a frozen prefill accepts connections and never answers: a saturated pool's queue
    pre.proc.send_signal(signal.SIGSTOP)
    try:
        readiness, busy = _verdict_until(url, 503, "PrefillBusy")
    finally:
        pre.proc.send_signal(signal.SIGCONT)
    assert set(readiness) == {200}, readiness  # the pod stayed Ready all along
    assert busy["ready"] is False and busy["latched"] is True
    assert (
        f"PrefillBusy: prefill {_url(pre)}/v1/completions: no answer within the " in busy["reason"]
    )
    readiness, recovered = _verdict_until(url, 200)
    assert set(readiness) == {200} and recovered["passing"] is True, recovered

    pre.proc.send_signal(signal.SIGKILL)
    pre.proc.wait(10)
    readiness, gone = _verdict_until(url, 503, "PrefillUnreachable")
    assert set(readiness) == {200}, readiness
    assert (
        f"PrefillUnreachable: prefill {_url(pre)}/v1/completions: cannot connect" in gone["reason"]
    )
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    assert "disagg_canary_passing 0\n" in metrics and "disagg_canary_ready 1\n" in metrics
    flips = [json.loads(x) for x in canary.log_tail(80).splitlines() if '"transfer_path"' in x]
    # one line per flip: passed, busy, passed, unreachable; the refused one failed at once
    assert [f["ready"] for f in flips] == [True, False, True, False], flips
    assert flips[-1]["took_ms"] < TIMEOUT_S * 1000
    assert flips[1]["took_ms"] >= TIMEOUT_S * 1000  # busy: it ran out its deadline


def test_a_restarted_decode_engine_is_unready_until_a_canary_passes_on_it(
    workers: Workers,
) -> None:
    pre, dec = _pair(workers)
    url = _canary(workers, _url(pre), _url(dec))
    status, first = _ready(url)
    assert status == 200 and first["engine"].startswith(f"pid {dec.proc.pid} "), first

    port = dec.ready["http_port"]
    workers.stop_one(dec)
    status, down = _ready(url)
    assert status == 503 and "does not answer /health" in down["reason"], down
    again = workers.worker("decode", http_port=port)  # the engine container restarted
    assert _url(again) == _url(dec)
    # the first probe after the restart runs a canary on the new engine and answers
    # with that canary's verdict
    status, body = _ready(url)
    assert status == 200, body
    assert body["engine"].startswith(f"pid {again.proc.pid} ") and body != first
    assert body["engine"] != first["engine"]
    # the new engine was warmed before its first P/D request, like the first one
    assert _requests(_url(again), "completion") == 1 and _requests(_url(again), "decode") >= 1


def test_once_exits_by_the_verdict(workers: Workers) -> None:
    pre, dec = _pair(workers)
    argv = disagg_argv("worker", "canary", "--prefill", _url(pre), "--decode", _url(dec))
    argv += ["--model", "tiny", "--once", "--timeout-s", str(TIMEOUT_S)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout.splitlines()[-1])
    assert line["passed"] is True and line["problem"] is None

    # a decode URL where nothing listens: the decode hop fails, named
    at = argv.index("--decode") + 1
    dead = [*argv[:at], "http://127.0.0.1:9", *argv[at + 1 :]]
    done = subprocess.run(dead, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "decode http://127.0.0.1:9" in json.loads(done.stdout.splitlines()[-1])["problem"]


def test_a_floor_above_what_loopback_moves_says_slow_transport_and_passes(
    workers: Workers,
) -> None:
    pre, dec = _pair(workers)
    argv = disagg_argv("worker", "canary", "--prefill", _url(pre), "--decode", _url(dec))
    argv += ["--model", "tiny", "--once", "--timeout-s", str(TIMEOUT_S)]

    def once(floor: str) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            [*argv, "--min-bandwidth-gbps", floor], capture_output=True, text=True, timeout=60
        )
        assert done.stdout.strip(), f"no verdict line (exit {done.returncode}): {done.stderr}"
        return done.returncode, json.loads(done.stdout.splitlines()[-1])

    # 10000 GB/s: far above loopback's CMA or TCP (a few GB/s at best)
    code, line = once("10000")
    assert code == 0 and line["passed"] is True and line["problem"] is None, line
    assert line["transport"].startswith("SlowTransport: the KV moved at "), line
    assert f"({line['kv_bytes']} bytes in " in line["transport"]
    assert "below the floor of 10000 GB/s" in line["transport"]
    assert line["kv_bytes"] > 0 and 0 < line["kv_seconds"] < TIMEOUT_S
    assert line["kv_gbytes_per_second"] == pytest.approx(
        line["kv_bytes"] / line["kv_seconds"] / 1e9, rel=1e-3
    )
    assert line["kv_floor_gbytes_per_second"] == 10000.0
    # 0.0001 GB/s (100 kB/s): far below it, the same path passes
    code, line = once("0.0001")
    assert code == 0 and line["problem"] is None and line["transport"] is None, line
    assert line["kv_gbytes_per_second"] > 0.0001 and line["kv_measured_from"] == "answer"
    assert line["kv_bandwidth"] == "at or above the floor of 0.0001 GB/s"


def test_a_slow_path_keeps_the_pod_ready_and_says_so_on_ready(workers: Workers) -> None:
    pre, dec = _pair(workers)
    url = _canary(workers, _url(pre), _url(dec), "--min-bandwidth-gbps", "10000")
    status, body = _ready(url)
    # readiness says "this pod can serve": a slow KV path still serves
    assert status == 200 and body["ready"] is True, body
    status, body = _get(url, "/verdict")
    assert status == 200 and body["passing"] is True, body
    assert body["reason"].startswith("SlowTransport: the KV moved at "), body
    assert body["kv_bandwidth"] == "below the floor of 10000 GB/s"
