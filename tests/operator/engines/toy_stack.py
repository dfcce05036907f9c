"""The toy engine's pods, router and canary as processes, from what render wrote: the stack
the P/D seam tests (test_seam_pd.py, test_seam_pd_rooms.py) run requests through.

Its pods run as processes from what render wrote (its local-run part's ``process``, at
addresses of their own with the rendered ports, as the local kubelet runs pods); the
router and the canary run as `disagg proxy` and `disagg worker canary` processes with the
rendered arguments, only their listen ports changed and the canary's pod-local decode URL
pointed at the decode pod's address; a hosts file stands for cluster DNS
(``LOCAL_KUBELET_HOSTS_FILE``, answered by the kubelet's DNS shim)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from disagg_operator.engines.settings import Settings
from disagg_operator.render.objects import render
from disagg_tools.local.children import Child, disagg_argv, start_child, stop_children, wait_ready
from disagg_tools.local.kubelet.rules.containers import HOSTS_ENV, with_dns
from disagg_tools.local.serving import wait_healthy
from tests.operator.builders import body, by_kind
from tests.support.toy_engine.engine import Toy
from tests.support.toy_engine.local import ToyLocal

ROOT = Path(__file__).resolve().parents[3]


def toy_body(engine: Toy) -> dict[str, Any]:
    obj = body()
    obj["spec"]["engine"] = {"type": engine.name, "image": "example.com/toy:1"}
    obj["spec"]["model"] = "toy"
    obj["spec"]["router"] = {"enabled": True, "replicas": 1}
    return obj


def container(pod: dict[str, Any], name: str) -> dict[str, Any]:
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


def _hosts(router_args: list[str], canary: dict[str, Any], address: dict[str, str]) -> str:
    """Cluster DNS: every Service name the router and the canary dial → its pod."""
    kv = router_args[router_args.index("--kv-revision") + 1]
    lines = []
    for role in ("prefill", "decode"):
        service = router_args[router_args.index(f"--{role}-service") + 1]
        lines.append(f"{service.rpartition(':')[0].replace('{kv}', kv)} {address[role]}")
    prefill_host = canary["args"][canary["args"].index("--prefill") + 1].split("/")[2]
    lines.append(f"{prefill_host.rpartition(':')[0]} {address['prefill']}")
    return "\n".join(lines) + "\n"


def toy_stack(tmp: Path, engine: Toy, address: dict[str, str]) -> Iterator[Stack]:
    """``engine``'s stack, its pods at ``address`` (role → a loopback address of its own),
    stopped when the generator is closed."""
    settings = Settings(canary_image="example.com/disagg:1").with_engines(engine)
    objects = render(toy_body(engine), hmac_key="k", settings=settings)
    pods = {p["metadata"]["labels"]["disagg.dev/role"]: p for p in by_kind(objects, "Pod")}
    router = by_kind(objects, "Deployment")[0]["spec"]["template"]
    router_args = container(router, "router")["args"]
    canary = container(pods["decode"], "transfer-canary")
    (tmp / "hosts").write_text(_hosts(router_args, canary, address))
    # the toy engine's modules importable as an engine's own package would be (the
    # project's root itself cannot go on the path: its operator/ shadows Python's operator)
    (tmp / "path").mkdir()
    (tmp / "path" / "tests").symlink_to(ROOT / "tests")
    dns = {HOSTS_ENV: str(tmp / "hosts"), "PYTHONPATH": str(tmp / "path")}
    env = {**os.environ, **with_dns(dns)}
    children: list[Child] = []
    try:
        urls = {}
        for role, pod in pods.items():
            engine_container = container(pod, "engine")
            command = [*engine_container["command"], *engine_container.get("args", [])]
            run = ToyLocal().process(
                pod["metadata"]["name"], command, {}, secret_path="", address=address[role],
            )  # fmt: skip
            children.append(start_child(role, run.argv, env, tmp))
            urls[role] = f"http://{address[role]}:{run.http_port}"
        for child, url in zip(children, urls.values(), strict=True):
            wait_healthy(child, url, 30, lambda _: None)  # as disagg up waits for its pods
        command = container(router, "router")["command"]
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


def canary_once(stack: Stack) -> tuple[int, dict[str, Any]]:
    """One `disagg worker canary --once` with the rendered arguments: its exit code and line."""
    done = subprocess.run(
        [*stack.canary_argv, "--once"], env=stack.env, capture_output=True, timeout=60
    )
    return done.returncode, json.loads(done.stdout.decode().strip().splitlines()[-1])
