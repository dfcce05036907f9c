"""`disagg bench faults` runs every phase on the quickstart, short, and reports the
documented keys. The figures themselves are the benchmark's to report, not a test's to
assert: only that each phase measured something."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from disagg_tools.bench.rules.fault_figures import KEYS, TARGETS

# The bench's own limit, and the test's a minute above it: a slow run fails here with the
# phases it reached (its progress on stderr), not as a timeout of the whole test.
BENCH_TIMEOUT_S = 300
pytestmark = pytest.mark.timeout(BENCH_TIMEOUT_S + 60)

COUNTS = {
    "load_statuses", "bad_peer_statuses", "prefill_restart_requests", "fuzz_kinds",
    "prefill_kill_statuses",
}  # fmt: skip
FLAGS = {"release_freed", "fuzz_still_serves"}


def test_every_phase_reports_the_documented_keys() -> None:
    argv = [sys.executable, "-m", "disagg_operator.cli", "bench", "faults", "--json"]
    argv += ["--load-s", "3", "--phase-s", "2", "--fuzz-frames", "300", "--clients", "4"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"`disagg bench faults` ran past {BENCH_TIMEOUT_S} s; it said:\n{_text(e)}")
    assert done.returncode == 0, done.stderr
    for phase in ("load:", "bad peer:", "prefill restart:", "release:", "fuzz:", "prefill kill:"):
        assert phase in done.stderr  # progress goes to stderr
    result = json.loads(done.stdout)
    for key in KEYS:
        value = result[key]
        if key in COUNTS:
            assert isinstance(value, dict) and all(isinstance(n, int) for n in value.values())
        elif key in FLAGS:
            assert isinstance(value, bool), key
        else:
            assert isinstance(value, (int, float)) and not isinstance(value, bool), key
            assert value >= 0, key
    assert result["load_requests"] > 0 and result["load_clients"] == 4
    assert result["bad_peer_requests"] > 0
    assert result["fuzz_frames"] == 300
    assert result["fuzz_answered"] > 0  # the frames reached the prefill's side channel
    assert result["fuzz_still_serves"] is True
    assert result["prefill_kill_requests"] > 0
    assert result["targets"] == TARGETS
    assert set(result["met"]) == set(TARGETS)
    assert all(isinstance(v, bool) for v in result["met"].values())


def _text(e: subprocess.TimeoutExpired) -> str:
    """What the killed bench had written to stderr (its progress), the last of it."""
    said = e.stderr or b""
    return (said.decode(errors="replace") if isinstance(said, bytes) else said)[-4000:]
