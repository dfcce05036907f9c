"""`disagg worker canary` against two real reference workers on loopback: /ready is 200
while prefill → decode KV transfer works, and 503 with the failing hop named soon after
the prefill dies; `--once` says the same as an exit code; a bandwidth floor above what
loopback moves says SlowTransport and still passes (a slow path serves).

"Soon" is read off the canary's own answers, not the test's clock: every 200 after the
kill reused a result at most one interval old (its reason says how old), and the first
canary after that failed on the prefill hop, well within its deadline (its flip line says
how long it took)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from disagg_worker.serve.localrun import Child, disagg_argv, start_child, wait_ready
from tests.worker.serve.conftest import Workers

TIMEOUT_S, INTERVAL_S = 5.0, 1.0
HANG_S = 60.0  # only guards a hang: past --fresh-s (30) a canary that never ran again says so
PASSED = re.compile(r"the last canary passed (\d+) s ago in ")


def _ready(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url + "/ready", timeout=TIMEOUT_S + 5) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


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


def test_ready_while_kv_moves_and_503_soon_after_prefill_dies(workers: Workers) -> None:
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
    url = _canary(workers, _url(pre), _url(dec))
    canary = workers.children[-1]
    status, body = _ready(url)
    assert status == 200, body
    assert body["ready"] is True and body["prefill"] == _url(pre)
    # the KV the canary's decode read, as the reference worker answered it
    assert body["kv_bytes"] > 0 and body["kv_measured_from"] == "answer"
    assert body["kv_bandwidth"] == "not checked: no floor"

    # before its first P/D request the canary warmed decode's engine with one plain
    # completion (vLLM CPU on AMX dies when its first forward pass is over remote KV)
    assert _requests(_url(dec), "completion") == 1 and _requests(_url(dec), "decode") >= 1

    # a probe within the interval reuses the result: no second request reaches prefill
    # (a canary of its own, whose interval no slow host can outlast between two probes)
    served = _requests(_url(pre))
    assert served >= 1  # the first canary's prefill hop
    patient = _canary(workers, _url(pre), _url(dec), "--interval-s", "600")
    assert _ready(patient)[0] == 200
    served = _requests(_url(pre))
    assert _ready(patient)[0] == 200
    assert _requests(_url(pre)) == served
    workers.stop_one(workers.children[-1])

    pre.proc.send_signal(signal.SIGKILL)
    pre.proc.wait(10)
    ages, body = _ready_until_503(url)
    assert body["ready"] is False
    # every 200 after the kill reused a result at most one interval old (the canary's own
    # clock, whole seconds), and the canary that ran next failed on the prefill hop
    assert all(age <= INTERVAL_S for age in ages), ages
    assert "the last canary failed: prefill" in body["reason"]
    assert _url(pre) in body["reason"]
    log = canary.log_tail(50)
    flips = [json.loads(x) for x in log.splitlines() if '"event": "transfer_path"' in x]
    assert [f["ready"] for f in flips] == [True, False]  # one line per flip, no more
    assert flips[-1]["took_ms"] < TIMEOUT_S * 1000  # it failed, not ran out its deadline


def _ready_until_503(url: str) -> tuple[list[int], dict[str, Any]]:
    """Probe /ready until it answers 503: the age in whole seconds (the canary's clock) of
    the passing result each 200 on the way reused, and the 503's body."""
    ages: list[int] = []
    deadline = time.monotonic() + HANG_S
    while (answer := _ready(url))[0] != 503:
        found = PASSED.search(answer[1]["reason"])
        assert answer[0] == 200 and found, answer
        ages.append(int(found.group(1)))
        assert time.monotonic() < deadline, f"still {answer} after {HANG_S} s"
        time.sleep(0.2)
    return ages, answer[1]


def test_once_exits_by_the_verdict(workers: Workers) -> None:
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
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
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
    argv = disagg_argv("worker", "canary", "--prefill", _url(pre), "--decode", _url(dec))
    argv += ["--model", "tiny", "--once", "--timeout-s", str(TIMEOUT_S)]

    def once(floor: str) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            [*argv, "--min-bandwidth-gbps", floor], capture_output=True, text=True, timeout=60
        )
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
    pre, dec = workers.spawn("prefill"), workers.spawn("decode")
    workers.ready(pre, dec)
    url = _canary(workers, _url(pre), _url(dec), "--min-bandwidth-gbps", "10000")
    status, body = _ready(url)
    # readiness says "this pod can serve": a slow KV path still serves
    assert status == 200 and body["ready"] is True, body
    assert body["reason"].startswith("SlowTransport: the KV moved at "), body
    assert body["kv_bandwidth"] == "below the floor of 10000 GB/s"
