"""`disagg up --runtime podman`: the rendered pods as pods of containers from the images
`make images` builds, over a network the run creates.

A pod's containers share its network and PID namespace, pods do not: the KV cache moves
between two pods over NIXL, across a real interface, as uid 65532 with a read-only root
and no capabilities; the output equals the process run's; a failing liveness probe
restarts the container; and nothing is left behind, whether the run ends by itself, by
Ctrl-C while starting, or by SIGKILL (the next run sweeps it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.containers.conftest import ROOT, podman

pytestmark = pytest.mark.containers

QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
PROMPT = "Hello pods"
RUN = "disagg.dev/up-run"
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Up:
    """One `disagg up --runtime podman` in the background and what it printed."""

    def __init__(self, manifest: Path, log: Path, *args: str) -> None:
        self.log = log
        argv = [sys.executable, "-m", "disagg_operator.cli", "up", "--runtime", "podman"]
        self.proc = subprocess.Popen(
            [*argv, str(manifest), "--port", "0", *args],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    @property
    def text(self) -> str:
        return self.log.read_text()

    def wait_for(self, pattern: str, timeout_s: float = 240) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = re.search(pattern, self.text)
            if found:
                return found
            assert self.proc.poll() is None, f"disagg up exited:\n{self.text}"
            time.sleep(0.2)
        raise AssertionError(f"no {pattern!r} after {timeout_s} s:\n{self.text}")

    @property
    def run_id(self) -> str:
        return self.wait_for(r"network disagg-up-(\w+)")[1]

    def stop(self, sig: signal.Signals = signal.SIGINT, timeout_s: float = 120) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout_s)


def _left(run_id: str) -> list[str]:
    out = []
    for args in (("pod", "ps"), ("ps", "-a"), ("volume", "ls"), ("network", "ls")):
        listed = podman(*args, "-q", "--filter", f"label={RUN}={run_id}").stdout.split()
        out += [f"{args[0]} {x}" for x in listed]
    return out


@pytest.fixture
def up(tmp_path: Path, images: dict[str, str]) -> Iterator[Up]:
    runs: list[Up] = []

    def start(manifest: Path = QUICKSTART, *args: str) -> Up:
        runs.append(Up(manifest, tmp_path / f"up-{len(runs)}.log", *args))
        return runs[-1]

    yield start  # type: ignore[misc]
    for run in runs:
        if run.proc.poll() is None:
            run.stop(signal.SIGKILL)
    ids = [m[1] for r in runs for m in re.finditer(r"network disagg-up-(\w+)", r.text)]
    for run_id in ids:  # the test's own cleanup, whatever failed: never leak into others
        subprocess.run(
            [sys.executable, "-c", f"from disagg_tools.local.podman.runtime import "
             f"remove_run; remove_run({run_id!r})"], check=False, timeout=120,
        )  # fmt: skip


def _inspect(name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = json.loads(podman("inspect", name).stdout)
    return found[0]


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with DIRECT.open(req, timeout=120) as resp:
        out: dict[str, Any] = json.load(resp)
        return out


def _process_tokens() -> list[int]:
    """The same prompt through the process runner (`disagg up` without a runtime)."""
    done = subprocess.run(
        [sys.executable, "-m", "disagg_operator.cli", "up", str(QUICKSTART), "--port", "0",
         "--prompt", PROMPT], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"tokens:\s+(\[.*\])", done.stdout)
    assert found, done.stdout
    tokens: list[int] = json.loads(found[1])
    return tokens


def test_the_quickstart_moves_its_kv_between_two_isolated_pods(up: Any) -> None:
    run = up()
    url = run.wait_for(r"endpoint: (http://\S+)/v1/completions")[1]
    run_id = run.run_id
    assert re.search(r"proven\s+transfer path to quickstart-decode-0", run.text), run.text
    names = podman("ps", "--filter", f"label={RUN}={run_id}", "--format", "{{.Names}}")
    containers = sorted(n for n in names.stdout.split() if not n.endswith("-infra"))
    assert containers == [
        "quickstart-decode-0-engine",
        "quickstart-decode-0-transfer-canary",
        "quickstart-prefill-0-engine",
        "quickstart-prefill-0-wire-peer",
    ]
    ns: dict[str, dict[str, str]] = {}
    for name in containers:
        info = _inspect(name)
        assert info["Config"]["User"] == "65532:65532", name
        assert info["HostConfig"]["ReadonlyRootfs"] is True, name
        status = podman("exec", name, "cat", "/proc/self/status").stdout
        assert re.search(r"CapEff:\s+0+\n", status), status
        assert re.search(r"NoNewPrivs:\s+1\n", status), status
        assert podman("exec", name, "id", "-u").stdout.strip() == "65532"
        write = podman("exec", name, "touch", "/written", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr
        pid = info["State"]["Pid"]
        ns[name] = {k: os.readlink(f"/proc/{pid}/ns/{k}") for k in ("net", "pid", "ipc")}
    # one pod's containers share its namespaces; the two pods share none
    assert ns["quickstart-decode-0-engine"] == ns["quickstart-decode-0-transfer-canary"]
    for kind in ("net", "pid", "ipc"):
        assert ns["quickstart-decode-0-engine"][kind] != ns["quickstart-prefill-0-engine"][kind]
    # each pod has its own address on the run's network, the one its env advertises
    env = dict(e.split("=", 1) for e in _inspect("quickstart-prefill-0-engine")["Config"]["Env"])
    prefill_ip = re.search(r"ready\s+prefill quickstart-prefill-0: http://([\d.]+):", run.text)
    assert prefill_ip and env["DISAGG_ADVERTISE_HOST"] == prefill_ip[1]
    assert env["UCX_TLS"] == "tcp,self"  # the derived transports, kept
    out = _post(url + "/v1/completions", {"prompt": PROMPT, "max_tokens": 16})
    assert out["disagg"]["transfer_bytes"] > 0 and out["disagg"]["transfer_descriptors"] >= 1
    assert out["disagg"]["transfer_pushed"] == 0  # decode READs unless a role asks to push
    assert out["choices"][0]["token_ids"] == _process_tokens()
    assert run.stop() == 130
    assert "removed every pod, container, volume and network of the run" in run.text
    assert _left(run_id) == []


def _verdict(canary: str) -> dict[str, Any]:
    """The canary's ``GET /verdict``, asked inside its pod."""
    ask = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8090/verdict').read().decode())"
    found: dict[str, Any] = json.loads(podman("exec", canary, "python", "-c", ask).stdout)
    return found


def test_the_canary_names_the_wire_between_two_pods_tcp_as_expected(up: Any) -> None:
    """Two pods have their own namespaces: UCX sees the prefill pod's wire peer as
    inter-node and reads over tcp on the pod's interface, the wire the derivation expects
    for pods with no RDMA block, so the canary passes without UnexpectedTransport."""
    run = up()
    run.wait_for(r"endpoint: ")
    canary = "quickstart-decode-0-transfer-canary"
    deadline = time.monotonic() + 120
    while (body := _verdict(canary))["wire"] is None and time.monotonic() < deadline:
        time.sleep(1)
    assert body["passing"] is True, body
    assert (body["wire"], body["wire_scope"]) == ("tcp", "inter-node"), body
    assert body["wire_chose"].startswith("tcp/eth0 "), body
    assert body["wire_expected"] == {"intra-node": ["shared-memory"], "inter-node": ["tcp"]}
    assert "UnexpectedTransport" not in body["reason"], body
    assert run.stop() == 130
    assert _left(run.run_id) == []


def test_prefill_tp2_feeds_a_tp1_decode_across_pods(up: Any) -> None:
    """examples/tp-mismatch-cpu.yaml in containers: the prefill pod's two rank processes in
    one container, each listening on its own side-channel port (5600, 5601) on the pod's
    address; the decode pod reads one KV head from each, the tokens those of TP 1."""
    run = up(ROOT / "examples" / "tp-mismatch-cpu.yaml")
    url = run.wait_for(r"endpoint: (http://\S+)/v1/completions")[1]
    assert re.search(r"proven\s+transfer path to tp-mismatch-decode-0", run.text), run.text
    ranks = podman("exec", "tp-mismatch-prefill-0-engine", "ps", "-eo", "args", check=False)
    if ranks.returncode == 0:  # procps may be absent from the image: then /proc says it
        assert ranks.stdout.count("disagg_worker.serve.rank_worker") == 1, ranks.stdout
    listening = podman("exec", "tp-mismatch-prefill-0-engine", "cat", "/proc/net/tcp").stdout
    ports = {int(line.split()[1].split(":")[1], 16) for line in listening.splitlines()[1:]
             if line.split()[3] == "0A"}  # fmt: skip
    assert {5600, 5601} <= ports, ports
    out = _post(url + "/v1/completions", {"prompt": PROMPT, "max_tokens": 16})
    assert out["disagg"]["transfer_descriptors"] == 2  # a head from each prefill rank
    assert out["choices"][0]["token_ids"] == _process_tokens()
    assert run.stop() == 130
    assert _left(run.run_id) == []


def test_ctrl_c_while_starting_leaves_nothing(up: Any) -> None:
    run = up()
    run.wait_for(r"started prefill quickstart-prefill-0")
    run_id = run.run_id
    assert run.stop() == 130
    assert _left(run_id) == [], run.text


def test_a_killed_run_is_swept_by_the_next_one(up: Any) -> None:
    first = up()
    first.wait_for(r"endpoint: ")
    gone = first.run_id
    first.stop(signal.SIGKILL)
    assert _left(gone) != []  # its pods and network outlive it
    second = up(QUICKSTART, "--prompt", PROMPT)
    assert second.proc.wait(300) == 0, second.text
    assert f"removing what run {gone} left" in second.text
    assert _left(gone) == [] and _left(second.run_id) == []


def test_a_failing_liveness_probe_restarts_the_container_in_its_pod(
    up: Any, tmp_path: Path
) -> None:
    body = yaml.safe_load(QUICKSTART.read_text())
    probe = {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 2}
    body["spec"]["prefill"]["podTemplate"] = {
        "spec": {"containers": [{"name": "engine", "livenessProbe": probe}]}
    }
    manifest = tmp_path / "liveness.yaml"
    manifest.write_text(yaml.safe_dump(body))
    run = up(manifest)
    run.wait_for(r"endpoint: ")
    line = run.wait_for(r"restart name=quickstart-prefill-0 .*cause=\"liveness[^\n]*", 120)[0]
    assert "attempt=1" in line
    run.wait_for(r"ready again prefill quickstart-prefill-0: http://[\d.]+:8000", 120)
    assert run.stop() == 130
    assert _left(run.run_id) == []


VLLM_CPU = ROOT / "examples" / "vllm-cpu.yaml"


@pytest.mark.vllm  # real vLLM in containers and beside them: CI runs it after the vLLM suite
def test_the_vllm_cpu_example_in_containers_equals_aggregated_vllm(up: Any, tmp_path: Path) -> None:
    """The rendered vLLM pods from the vllm-cpu image, token-identical to an aggregated
    vLLM (the decode pod's command without its KV connector, as the vLLM suite judges),
    with KV moved over NIXL between the two pods; the engine containers run as the image's
    uid 65532 with no capabilities and, through a podTemplate, a read-only root."""
    from disagg_tools.local import serving
    from disagg_tools.local.stack import Run, start_aggregated, stop_run
    from disagg_tools.vllm import checkpoint
    from disagg_tools.vllm.rules import metrics
    from tests.vllm.conftest import greedy, prompts

    model = tmp_path / "models" / "tiny-llama"
    checkpoint.write(model)
    judge = Run([], {})
    try:
        url = start_aggregated(VLLM_CPU, tmp_path, judge, model=str(model), say=lambda _: None)
        want = [greedy(url, p) for p in prompts()[:3]]
    finally:
        stop_run(judge)
    body = yaml.safe_load(VLLM_CPU.read_text())
    hardened = {
        "spec": {
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}],
            "containers": [
                {
                    "name": "engine",
                    "securityContext": {"readOnlyRootFilesystem": True, "runAsNonRoot": True},
                    "volumeMounts": [{"name": "scratch", "mountPath": "/tmp"}],
                }
            ],
        }
    }
    for role in ("prefill", "decode"):
        body["spec"][role]["podTemplate"] = hardened
    manifest = tmp_path / "vllm-cpu.yaml"
    manifest.write_text(yaml.safe_dump(body))
    logs = tmp_path / "logs"
    run = up(manifest, "--claim", f"models={model.parent}", "--log-dir", str(logs))
    proxy = run.wait_for(r"endpoint: (http://\S+)/v1/completions", 900)[1]
    for role in ("prefill", "decode"):
        name = f"vllm-cpu-{role}-0-engine"
        info = _inspect(name)
        assert info["HostConfig"]["ReadonlyRootfs"] is True, name
        status = podman("exec", name, "cat", "/proc/self/status").stdout
        assert re.search(r"CapEff:\s+0+\n", status) and re.search(r"NoNewPrivs:\s+1\n", status)
        assert podman("exec", name, "id", "-u").stdout.strip() == "65532"
    decode_log = logs / "vllm-cpu-decode-0.log"
    since = serving.log_size(decode_log)
    got = [greedy(proxy, p) for p in prompts()[:3]]
    assert got == want
    figures = serving.transfer_figures(decode_log, since, wait_s=30.0, expect=len(want))
    assert figures[metrics.COUNT] >= len(want) and figures[metrics.FAILED] == 0, figures
    run.proc.send_signal(signal.SIGINT)
    run.wait_for(r"stopping: \d+ preStop hook", 60)
    assert run.stop() == 130  # the second Ctrl-C skips vLLM's preStop sleep
    assert _left(run.run_id) == []


def test_the_pods_benchmark_reports_both_runtimes_and_the_iperf3_limits(images: Any) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "disagg_operator.cli", "bench", "pods", "--prompts", "512",
         "--repeat", "1", "--iperf-seconds", "1", "--ucx", "small:UCX_TCP_TX_SEG_SIZE=8kb",
         "--json"], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    case = result["by_prompt"]["512"]
    for run in ("process", "podman", "podman:small"):
        assert case[run]["kv_bytes"] > 0 and case[run]["nixl_gbps"] > 0, case[run]
        assert case[run]["ttft_ms"]["median"] > 0 and case[run]["unattributed"] == 0
    for streams in ("single", "multi"):
        assert result["iperf3"][f"{streams}_gbps"] > 0
        assert case["podman"][f"nixl_vs_iperf3_{streams}"] > 0
    assert result["runs"]["podman:small"]["env"] == {"UCX_TCP_TX_SEG_SIZE": "8kb"}
    assert result["runs"]["podman:small"]["iperf3"]["single_gbps"] > 0
    assert "nixl_vs_iperf3_single" not in case["process"] and case["ttft_ratio"] > 0
    left = podman("pod", "ps", "--filter", "label=disagg.dev/up-run", "--format", "{{.Name}}")
    assert left.stdout.split() == []  # every run's pods removed


def test_a_prefill_instance_spanning_two_pods_feeds_a_tp1_decode(up: Any) -> None:
    """examples/multinode-cpu.yaml in containers, disagg up playing LeaderWorkerSet's part:
    the prefill instance's two ranks in two pods of their own (network namespaces apart,
    rank 1 listening on 5601 of the worker pod's address only, the leader found by its
    name in the group's Service); the decode reads one KV head from each pod, the tokens
    those of TP 1."""
    run = up(ROOT / "examples" / "multinode-cpu.yaml")
    url = run.wait_for(r"endpoint: (http://\S+)/v1/completions")[1]
    assert re.search(r"proven\s+transfer path to multinode-decode-0", run.text), run.text
    leader, worker = "multinode-prefill-0-0-engine", "multinode-prefill-0-0-1-engine"
    pids = {name: _inspect(name)["State"]["Pid"] for name in (leader, worker)}
    nets = {name: os.readlink(f"/proc/{pid}/ns/net") for name, pid in pids.items()}
    assert nets[leader] != nets[worker]

    def listening(name: str) -> set[int]:
        table = podman("exec", name, "cat", "/proc/net/tcp").stdout
        return {int(line.split()[1].split(":")[1], 16) for line in table.splitlines()[1:]
                if line.split()[3] == "0A"}  # fmt: skip

    assert 5601 in listening(worker) and 5601 not in listening(leader)
    assert 5600 in listening(leader)
    out = _post(url + "/v1/completions", {"prompt": PROMPT, "max_tokens": 16})
    assert out["disagg"]["transfer_descriptors"] == 2  # a head from each pod's rank
    assert out["choices"][0]["token_ids"] == _process_tokens()
    assert run.stop() == 130
    assert _left(run.run_id) == []
