"""An engine whose P/D protocol is not vLLM's ``kv_transfer_params`` (the toy engine of
tests/support/toy_engine/: its operator class, its protocol and its server) runs through
render, the router and the transfer canary with no line of theirs changed.

Its pods run as processes from what render wrote (its local-run part's ``process``, at
addresses of their own with the rendered ports, as the local kubelet runs pods); the
router and the canary run as `disagg proxy` and `disagg worker canary` processes with the
rendered arguments, only their listen ports changed and the canary's pod-local decode URL
pointed at the decode pod's address; a hosts file stands for cluster DNS
(``LOCAL_KUBELET_HOSTS_FILE``, answered by the kubelet's DNS shim)."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from disagg_operator.engines.settings import Settings
from disagg_operator.render.objects import render
from disagg_tools.local.children import Child, disagg_argv, start_child, stop_children, wait_ready
from disagg_tools.local.kubelet.rules.containers import HOSTS_ENV, with_dns
from disagg_tools.local.serving import wait_healthy
from tests.operator.builders import body, by_kind
from tests.support.toy_engine.engine import Toy
from tests.support.toy_engine.local import ToyLocal
from tests.support.toy_engine.pd import COMPUTED, FETCHED
from tests.worker.serve.conftest import get, metric, post, wait_until

ROOT = Path(__file__).resolve().parents[3]
SETTINGS = Settings(canary_image="example.com/disagg:1").with_engines(Toy())
PROTOCOL = ["--pd-protocol", Toy.pd_protocol]
# the pods' own addresses (one loopback address each, as the local kubelet gives them)
ADDRESS = {"prefill": "127.0.7.1", "decode": "127.0.7.2"}


def _toy() -> dict[str, Any]:
    obj = body()
    obj["spec"]["engine"] = {"type": "toy", "image": "example.com/toy:1"}
    obj["spec"]["model"] = "toy"
    obj["spec"]["router"] = {"enabled": True, "replicas": 1}
    return obj


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == name)


def _with(args: list[str], **values: str) -> list[str]:
    """``args`` with each ``--flag``'s value replaced (``listen_port`` → ``--listen-port``)."""
    out = list(args)
    for key, value in values.items():
        out[out.index("--" + key.replace("_", "-")) + 1] = value
    return out


@dataclass
class Stack:
    objects: list[dict[str, Any]]
    prefill: str  # the pods' URLs
    decode: str
    router: str
    canary_argv: list[str]
    env: dict[str, str]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("toy")
    objects = render(_toy(), hmac_key="k", settings=SETTINGS)
    pods = {p["metadata"]["labels"]["disagg.dev/role"]: p for p in by_kind(objects, "Pod")}
    router = by_kind(objects, "Deployment")[0]["spec"]["template"]
    router_args = _container(router, "router")["args"]
    canary = _container(pods["decode"], "transfer-canary")
    # cluster DNS: every Service name the router and the canary dial → its pod
    kv = router_args[router_args.index("--kv-revision") + 1]
    hosts = tmp / "hosts"
    lines = []
    for role in ("prefill", "decode"):
        service = router_args[router_args.index(f"--{role}-service") + 1]
        lines.append(f"{service.rpartition(':')[0].replace('{kv}', kv)} {ADDRESS[role]}")
    prefill_host = canary["args"][canary["args"].index("--prefill") + 1].split("/")[2]
    lines.append(f"{prefill_host.rpartition(':')[0]} {ADDRESS['prefill']}")
    hosts.write_text("\n".join(lines) + "\n")
    # the toy engine's modules importable as an engine's own package would be (the
    # project's root itself cannot go on the path: its operator/ shadows Python's operator)
    (tmp / "path").mkdir()
    (tmp / "path" / "tests").symlink_to(ROOT / "tests")
    env = {**os.environ, **with_dns({HOSTS_ENV: str(hosts), "PYTHONPATH": str(tmp / "path")})}
    children: list[Child] = []
    try:
        urls = {}
        for role, pod in pods.items():
            engine = _container(pod, "engine")
            command = [*engine["command"], *engine.get("args", [])]
            run = ToyLocal().process(
                pod["metadata"]["name"], command, {}, secret_path="", ports=None, cores=(),
                address=ADDRESS[role],
            )  # fmt: skip
            children.append(start_child(role, run.argv, env, tmp))
            urls[role] = f"http://{ADDRESS[role]}:{run.http_port}"
        for child, url in zip(children, urls.values(), strict=True):
            wait_healthy(child, url, 30, lambda _: None)  # as disagg up waits for its pods
        command = _container(router, "router")["command"]
        argv = disagg_argv(*command[1:], *_with(router_args, host="127.0.0.1", port="0"))
        children.append(start_child("router", argv, env, tmp))
        port = wait_ready(children[-1], timeout_s=60)["http_port"]
        canary_argv = disagg_argv(
            *canary["command"][1:], *_with(canary["args"], decode=urls["decode"], port="0")
        )
        yield Stack(objects, urls["prefill"], urls["decode"], f"http://127.0.0.1:{port}",
                    canary_argv, env)  # fmt: skip
    finally:
        stop_children(children)


def _canary_once(stack: Stack) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [*stack.canary_argv, "--once"], env=stack.env, capture_output=True, timeout=60
    )
    return done.returncode, json.loads(done.stdout.decode().strip().splitlines()[-1])


def test_render_names_the_engines_protocol_to_the_router_and_the_canary(stack: Stack) -> None:
    pods = by_kind(stack.objects, "Pod")
    router = by_kind(stack.objects, "Deployment")[0]["spec"]["template"]
    canary = _container(pods[1], "transfer-canary")
    for args in (_container(router, "router")["args"], canary["args"]):
        assert [b for a, b in itertools.pairwise(args) if a == "--pd-protocol"] == PROTOCOL[1:]
    # the engine container runs the toy's own command, with no side channel
    assert _container(pods[0], "engine")["command"][:3] == ["toy-serve", "--role", "prefill"]


def test_the_router_splits_a_request_in_the_toy_protocol(stack: Stack) -> None:
    before = get(stack.prefill + "/toy/stats")
    status, out = post(stack.router + "/v1/completions", {"prompt": "hello", "max_tokens": 6})
    assert status == 200, out
    _, alone = post(stack.decode + "/v1/completions", {"prompt": "hello", "max_tokens": 6})
    assert out["choices"][0]["text"] == alone["choices"][0]["text"]  # the same tokens
    assert out["disagg"]["proxy"]["path"] == "pd"
    assert out["toy_kv"] == "fetched" and out["toy_kv_bytes"] == 4096
    after = get(stack.prefill + "/toy/stats")
    assert after["prefills"] == before["prefills"] + 1 and after["held"] == 0
    # a field the toy protocol owns is the proxy's: refused from a client, naming it
    status, out = post(stack.router + "/v1/completions", {"prompt": "x", "toy_ticket": {}})
    assert status == 400 and out["error"]["message"].startswith("toy_ticket: ")


def test_a_failed_decode_hop_releases_the_ticket_the_toy_way(stack: Stack) -> None:
    before = get(stack.prefill + "/toy/stats")
    status, _ = post(stack.router + "/v1/completions", {"prompt": "boom", "max_tokens": 2})
    assert status == 502
    wait_until(
        lambda: get(stack.prefill + "/toy/stats")["drops"] == before["drops"] + 1,
        10, "the toy prefill's /toy/drop",
    )  # fmt: skip
    assert get(stack.prefill + "/toy/stats")["held"] == 0


def test_the_canary_passes_through_the_toy_protocol_and_measures_its_kv(stack: Stack) -> None:
    code, line = _canary_once(stack)
    assert code == 0 and line["passed"], line
    assert line["kv_bytes"] == 4096 and line["kv_gbytes_per_second"] > 0


def test_a_lost_ticket_is_recomputing_to_the_router_and_the_canary(stack: Stack) -> None:
    """Last: the prefill loses every ticket from now on."""
    post(stack.prefill + "/toy/forget", {})
    recomputed = 'disagg_proxy_decode_recomputed_total{reason="decode_computed"}'
    before = metric(get(stack.router + "/metrics"), recomputed)
    status, out = post(stack.router + "/v1/completions", {"prompt": "again", "max_tokens": 3})
    assert status == 200 and out["toy_kv"] == "computed"  # right tokens, no P/D
    assert metric(get(stack.router + "/metrics"), recomputed) == before + 1
    code, line = _canary_once(stack)
    assert code == 1 and line["problem"].startswith("DecodeRecomputing: the toy decode"), line
    page = get(stack.decode + "/metrics")
    assert metric(page, COMPUTED) >= 2 and metric(page, FETCHED) >= 2
