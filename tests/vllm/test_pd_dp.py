"""Real vLLM with data-parallel pools (examples/vllm-cpu-dp2.yaml): two engines behind each
pod's API server, each with a NIXL side channel of its own on the rendered
sideChannelPort + its DP rank, every one proven by the canary's request per engine pair.

Judged by vLLM itself: each engine listens where the contract says (a TCP connect to
port + d), the prefill engine a request reaches names its own side channel in its
kv_transfer_params, and the canary over both pairs passes with the two side channels.
"""

from __future__ import annotations

import json
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.engines.vllm import contract as vllm
from disagg_tools.local.children import disagg_argv

from .conftest import ROOT, Stack, greedy, launched, prompts

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

DP2_CPU = ROOT / "examples" / "vllm-cpu-dp2.yaml"


def _manifest(model: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(DP2_CPU.read_text())
    body["metadata"].update(namespace="default", uid="local")
    body["spec"]["model"] = str(model)
    body["spec"]["transferCanary"] = {"image": "disagg-worker-cpu:local"}  # runs as a process
    return body


@pytest.fixture(scope="module")
def dp_stack(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from launched(_manifest(tiny_llama), tmp_path_factory.mktemp("pd-dp"))


def _engine(stack: Stack, role: str) -> Any:
    return stack.run.engines[stack.run.names[stack.url(role)]]


def _listens(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2.0)
        return s.connect_ex((host, port)) == 0


def test_each_engine_listens_on_its_own_side_channel(dp_stack: Stack) -> None:
    for role in ("prefill", "decode"):
        child = _engine(dp_stack, role)
        base = int(child.env[vllm.SIDE_CHANNEL_PORT])
        host = child.env.get(vllm.SIDE_CHANNEL_HOST, "127.0.0.1")
        assert [_listens(host, base + d) for d in range(2)] == [True, True], role
        started = dp_stack.log(role).read_text()
        assert "EngineCore_DP1" in started  # two engines behind one API server


def test_each_prefill_engine_names_its_side_channel(dp_stack: Stack) -> None:
    """The rank header steers the request: engine d answers with port + d."""
    base = int(_engine(dp_stack, "prefill").env[vllm.SIDE_CHANNEL_PORT])
    url = dp_stack.url("prefill") + "/v1/completions"
    for d in range(2):
        body = {
            "prompt": prompts()[0], "max_tokens": 1,
            "kv_transfer_params": {"do_remote_decode": True, "do_remote_prefill": False},
        }  # fmt: skip
        request = _post(url, body, {vllm.DP_RANK_HEADER: str(d)})
        assert request["kv_transfer_params"]["remote_port"] == base + d


def test_the_canary_proves_every_engine_pair(dp_stack: Stack) -> None:
    prefill = _engine(dp_stack, "prefill")
    base = int(prefill.env[vllm.SIDE_CHANNEL_PORT])
    model = _get(dp_stack.url("decode") + "/v1/models")["data"][0]["id"]
    argv = disagg_argv(
        *("worker", "canary", "--once", "--model", model, "--timeout-s", "60"),
        *("--prefill", dp_stack.url("prefill"), "--decode", dp_stack.url("decode")),
        *("--prefill-ranks", "2", "--decode-ranks", "2"),
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    line = json.loads(done.stdout.splitlines()[-1])
    assert line["passed"], line
    ports = [int(r["side_channel"].rsplit(":", 1)[1]) for r in line["ranks"]]
    assert [(r["prefill_rank"], r["decode_rank"]) for r in line["ranks"]] == [(0, 0), (1, 1)]
    assert ports == [base, base + 1]


def test_requests_through_the_proxy_are_answered(dp_stack: Stack) -> None:
    for prompt in prompts()[:2]:
        assert len(greedy(dp_stack.proxy, prompt)) > 0


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        answer: dict[str, Any] = json.load(resp)
    return answer


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers}
    )
    with urllib.request.urlopen(request, timeout=120) as resp:
        answer: dict[str, Any] = json.load(resp)
    return answer
