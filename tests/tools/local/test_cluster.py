"""`disagg cluster`: the operator's own job on the embedded cluster (API server stand-in, the
operator as its own process, the local kubelet), driven by kubectl as on a cluster: the
quickstart applied, Ready, a prompt answered through the operator's pods and router; get,
describe, scale and delete work against it; Ctrl-C leaves no process behind."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
CLUSTER = [sys.executable, "-m", "disagg_operator.cli", "cluster"]
KUBECTL = shutil.which("kubectl") or str(Path(sys.executable).with_name("kubectl"))


def _run(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLUSTER, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_the_quickstart_answers_a_prompt_through_the_operators_pods_and_router() -> None:
    done = _run("-f", str(QUICKSTART), "--port", "0", "--prompt", "The quick brown fox", "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    row = next(line.split() for line in lines if line.startswith("quickstart "))
    assert row[1:4] == ["1/1", "1/1", "True"], done.stdout  # kubectl get disagg's own row
    assert any(line.startswith("completion: ") for line in lines), done.stdout
    # the transfer line comes from the decode pod's figures in the router's answer
    transfer = next(line for line in lines if line.startswith("transfer:"))
    assert "NIXL READ" in transfer and "descriptor(s)" in transfer, transfer


class _Serving:
    """`disagg cluster` left serving, its output read line by line."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.proc = subprocess.Popen(
            [*CLUSTER, "-f", str(QUICKSTART), "--port", "0", "--dir", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, prefix: str, timeout: float = 180) -> str:
        deadline, seen = time.monotonic() + timeout, []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, "\n".join(seen)
                continue
            seen.append(line)
            if line.strip().startswith(prefix):
                return line
        raise AssertionError(f"never printed {prefix!r}:\n" + "\n".join(seen))

    def kubectl(self, *args: str) -> str:
        config = str(self.folder / "kubeconfig")
        done = subprocess.run(
            [KUBECTL, "--kubeconfig", config, *args], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture()
def serving(tmp_path: Path) -> Iterator[_Serving]:
    run = _Serving(tmp_path)
    try:
        yield run
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait(30)


def _ready_decodes(run: _Serving, want: int) -> bool:
    row = run.kubectl("get", "disagg", "quickstart").splitlines()[1].split()
    return row[2] == f"{want}/{want}" and row[3] == "True"


def _eventually(check: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError("never happened")


def test_kubectl_gets_describes_scales_and_deletes_and_ctrl_c_leaves_nothing(
    serving: _Serving,
) -> None:
    front = serving.until("router").split()[1]
    serving.until("serving until Ctrl-C")
    children = psutil.Process(serving.proc.pid).children(recursive=True)
    assert len(children) >= 4, children  # the operator, prefill, decode, the router
    assert "Ready" in serving.kubectl("describe", "disagg", "quickstart")
    with urllib.request.urlopen(front + "/v1/models", timeout=30) as resp:  # OpenAI's list
        assert resp.status == 200 and json.load(resp)["data"][0]["object"] == "model"
    body = {"prompt": "Hello", "max_tokens": 4}
    request = urllib.request.Request(
        front + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        assert len(json.load(resp)["choices"][0]["token_ids"]) == 4
    serving.kubectl("scale", "disagg", "quickstart", "--replicas", "2")
    _eventually(lambda: _ready_decodes(serving, 2))
    serving.kubectl("delete", "disagg", "quickstart")
    pods = lambda: serving.kubectl("get", "pods", "-o", "name").split()  # noqa: E731
    _eventually(lambda: not pods())
    serving.proc.send_signal(signal.SIGINT)
    assert serving.proc.wait(60) == 0
    assert not [c for c in children if c.is_running() and c.status() != "zombie"]
    port = int(front.rsplit(":", 1)[1])
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # nothing listens on the forwarded port any more


def test_a_busy_port_is_refused_before_anything_starts_naming_the_fix() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        t0 = time.monotonic()
        done = _run("-f", str(QUICKSTART), "--port", str(port), timeout=30)
    took = time.monotonic() - t0
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"disagg cluster: --port {port}: ") and "--port 0" in line, line
    assert "Traceback" not in done.stderr and not done.stdout
    print(f"refused in {took:.2f} s")
