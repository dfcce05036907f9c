"""vLLM's own engine runs what the operator renders for an instance that spans pods.

The rendered LeaderWorkerSet's leader and worker commands, with LeaderWorkerSet's
environment expanded as the kubelet expands it (:mod:`disagg_tools.local.rules.groups`), run
as two `vllm serve` processes standing for two nodes (tensor parallel 2, one rank each,
each on a core of its own). The leader must answer aggregated TP 1's greedy tokens, and
the worker must have run headless (ranks only). The KV connector is left out: this checks
the multi-node flags; P/D itself is checked in test_pd.py and test_pd_tp.py.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from disagg_operator.render.objects import render
from disagg_tools.local.rules.env import PodFields, container_command, container_env, data_of
from disagg_tools.local.rules.groups import group_pods
from tests.vllm.conftest import Logprobs, _manifest, greedy, prompts

pytestmark = pytest.mark.vllm
LOCAL = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        return int(s.getsockname()[1])


def _argv(pod: dict[str, Any], env: dict[str, str], port: int, master: int) -> list[str]:
    """The pod's engine command as this host runs it (``$(VAR)`` from ``env``, as the
    kubelet expands it): `vllm serve` of this interpreter, a port of its own and a
    rendezvous port of its own (each pod has its own in a cluster); no KV connector."""
    command = container_command(pod["spec"]["containers"][0], env)
    assert command[:2] == ["vllm", "serve"]
    for flag in ("--kv-transfer-config", "--port"):
        at = command.index(flag)
        del command[at : at + 2]
    serve = [sys.executable, "-m", "vllm.entrypoints.cli.main", *command[1:]]
    return [*serve, "--port", str(port), "--master-port", str(master)]


def _healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        assert proc.poll() is None, log.read_text()[-4000:]
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"no /health from {url}:\n{log.read_text()[-4000:]}")


# Two greedy runs of one model at TP 1 and TP 2 sum in another order: where aggregated
# TP 1's two best tokens are this close (logprob), either may win (a near-tie).
TIE = 0.05


def _first_difference(got: list[int], want: list[int], tops: Logprobs) -> str | None:
    """None when ``got`` equals ``want`` up to the first position, if any, where they part
    at a near-tie of aggregated TP 1 (``tops``); else what differs."""
    for n, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        if mine != theirs:
            gap = abs(tops[n].get(theirs, 0.0) - tops[n].get(mine, -math.inf))
            return None if gap < TIE else f"position {n}: {mine} vs {theirs}, logprob gap {gap:.3f}"
    return None


def test_the_rendered_group_runs_tp2_across_two_nodes(
    tiny_llama: Path, aggregated: list[tuple[list[int], Logprobs]], tmp_path: Path
) -> None:
    body = _manifest(tiny_llama)
    body["spec"]["prefill"].update(tensorParallelSize=2, nodesPerInstance=2)
    decode = body["spec"]["decode"]  # prefill TP above decode's is refused; not run here
    decode["tensorParallelSize"] = 2
    decode["resources"] = {"limits": {"cpu": "2", "memory": "8Gi"}}
    objects = group_pods(render(body, hmac_key="k" * 32), lambda *_: LOCAL)
    group = [o for o in objects if o["metadata"]["name"].startswith("vllm-cpu-prefill-0-0")]
    assert [p["metadata"]["name"] for p in group] == [
        "vllm-cpu-prefill-0-0",
        "vllm-cpu-prefill-0-0-1",
    ]
    ports, master = [_free_port(), _free_port()], _free_port()
    procs: list[subprocess.Popen[bytes]] = []
    logs = [tmp_path / f"node{n}.log" for n in range(2)]
    try:
        for core, (pod, log) in enumerate(zip(group, logs, strict=True)):
            name = pod["metadata"]["name"]
            fields = PodFields(pod, LOCAL, LOCAL, "local")
            env = container_env(name, pod["spec"]["containers"][0], fields, data_of(objects))
            argv = _argv(pod, env, ports[core], master)
            env = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "UCX_TLS")}
            env |= {"VLLM_CPU_OMP_THREADS_BIND": str(core), "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
            with log.open("wb") as out:
                procs.append(
                    subprocess.Popen(
                        argv, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT
                    )
                )
        url = f"http://{LOCAL}:{ports[0]}"
        _healthy(url, procs[0], logs[0], 300)
        chosen = range(0, len(prompts()), 2)  # every other length: TP 2 on 2 shared cores
        got = {n: greedy(url, prompts()[n]) for n in chosen}
        parted = {
            n: _first_difference(mine, *aggregated[n])
            for n, mine in got.items()
            if mine != aggregated[n][0]
        }
        assert all(why is None for why in parted.values()), parted
        assert len(parted) < len(got)  # most prompts equal token for token
        assert "headless" in logs[1].read_text()  # the worker ran ranks only
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
