"""`disagg up examples/vllm-cpu.yaml --claim models=DIR --prompt ...` (what `make up-vllm` runs):
the whole command, as a user runs it, leaves nothing behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], timeout_s: float) -> tuple[int, str, str]:
    """Run ``cmd``; past the timeout, kill it and every process under it (vLLM engines
    included) and fail with what it printed so far."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        tree = psutil.Process(proc.pid).children(recursive=True)
        for p in [*tree, psutil.Process(proc.pid)]:
            p.kill()
        out, err = proc.communicate()
        pytest.fail(f"disagg up still running after {timeout_s:.0f} s:\n{out[-3000:]}{err[-2000:]}")
    return proc.returncode, out, err


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "binding", [[], ["--keep-cpu-binding"]], ids=["a-core-per-engine", "rendered-nobind"]
)
def test_up_answers_through_real_vllm_and_reports_vllms_transfers(
    tiny_llama: Path, binding: list[str]
) -> None:
    """Both CPU settings work end to end: the local one (a core per engine) and the one
    pods on a shared node get (``nobind``, OMP_NUM_THREADS = CPUs - 1)."""
    cmd = [
        sys.executable,
        "-m",
        "disagg_operator.cli",
        "up",
        str(ROOT / "examples" / "vllm-cpu.yaml"),
    ]
    # the local run with the example's own pvc:// model (a folder standing for the claim),
    # and with --model DIR in its place
    source = ["--claim", f"models={tiny_llama.parent}"] if binding else ["--model", str(tiny_llama)]
    cmd += [*source, "--prompt", "Rivers flow to the sea", "--port", "0"]
    cmd += binding
    code, text, err = _run(cmd, timeout_s=600)
    assert code == 0, text[-3000:] + err[-3000:]
    assert "vllm serve → python -m vllm.entrypoints.openai.api_server" in text
    if binding:
        assert f"claim models (mounted at /mnt/models) → {tiny_llama.parent}" in text
    # at the pod's own address, with the rendered port
    assert re.search(r"ready   decode vllm-cpu-decode-0: http://127\.0\.\d+\.\d+:8000 \(vLLM", text)
    assert re.search(r"completion: '.+'", text)
    tokens = re.search(r"tokens:     \[([0-9, ]+)\]", text)
    assert tokens and len(tokens.group(1).split(",")) == 16
    transfers = re.search(r"vLLM \(decode\) reports (\d+) NIXL transfer\(s\).*, (\d+) failed", text)
    assert transfers, text[-2000:]
    # vLLM logs its figures per 10 s interval, so the window can also hold the warm-up's
    # transfers, including a first handshake that timed out and was retried (and said).
    retried = text.count("P/D warm-up attempt")
    assert int(transfers.group(1)) >= 1 and int(transfers.group(2)) <= retried
    assert "stopped 3 processes" in text
    leftovers = [
        p.info["pid"]
        for p in psutil.process_iter(["pid", "cmdline"])
        if "vllm.entrypoints.openai.api_server" in " ".join(p.info["cmdline"] or [])
        and str(tiny_llama) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
