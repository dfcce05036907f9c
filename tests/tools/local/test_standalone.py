"""The local kubelet with an API server of its own and no operator: the quickstart's rendered
objects created once, as the operator's first sync would leave them, and everything else
the kubelet's and its controllers': both pods start at addresses of their own, the
decode pod turns Ready only once its canary sidecar has carried a P/D request through the
prefill Service (cluster DNS: the kubelet's name table), the router Deployment's pod
answers a P/D completion, and closing stops every process."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from disagg_operator.api import LABEL_ROLE
from disagg_tools.local.kubelet.standalone import RESOURCES, Standalone
from disagg_tools.local.stack import load, render_manifest

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"


def _until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


def _ready(body: dict[str, Any] | None) -> bool:
    conditions = ((body or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_the_rendered_quickstart_serves_pd_on_the_kubelet_without_the_operator(
    tmp_path: Path,
) -> None:
    with Standalone(tmp_path) as node:
        created = node.create(load(str(QUICKSTART)))  # its pods' owner, and their engine
        body = {**load(str(QUICKSTART)), "metadata": created["metadata"]}
        objects, _ = render_manifest(body, "k" * 64)
        held = [o for o in objects if o["kind"] in RESOURCES]
        assert {o["kind"] for o in objects} - {o["kind"] for o in held} == {"NetworkPolicy"}
        for obj in held:
            node.create(obj)
        roles = {
            o["metadata"]["name"]: o["metadata"]["labels"][LABEL_ROLE]
            for o in held
            if o["kind"] == "Pod"
        }
        for name in roles:
            _until(f"{name} Ready", lambda n=name: _ready(node.get("Pod", n)), 120)
        pods = node.pods()
        addresses = {pods[n].address for n in roles}
        assert len(addresses) == 2 and all(a.startswith(node.net) for a in addresses)
        decode = next(n for n, r in roles.items() if r == "decode")
        # the decode pod runs its canary sidecar, whose readiness made the pod Ready
        assert [p.container for p in pods[decode].processes] == ["engine", "transfer-canary"]
        router = _until(
            "the router's pod Ready",
            lambda: next(
                (n for n in node.pods() if n.startswith("quickstart-router") and
                 _ready(node.get("Pod", n))),
                None,
            ),
            60,
        )  # fmt: skip
        url = f"http://{node.pods()[router].address}:8080/v1/completions"
        request = urllib.request.Request(
            url, json.dumps({"prompt": "hello", "max_tokens": 4}).encode(),
            {"Content-Type": "application/json"},
        )  # fmt: skip
        answer = _until("a P/D answer through the router", lambda: _answer(request), 30)
        assert answer["disagg"]["proxy"]["path"] == "pd", answer["disagg"]
        assert answer["disagg"]["kv_source"] == "transferred"  # the KV came over NIXL
        pids = [node.pid(n, "engine") for n in roles]
    assert all(pid is not None and not psutil.pid_exists(pid) for pid in pids)


def _answer(request: urllib.request.Request) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            found: dict[str, Any] = json.load(resp)
            return found
    except OSError:  # the router resolves its Services every 5 s
        return None
