"""The chart's operator container, run as a process: its args start a working operator and
its probe and metrics ports answer where the Deployment says they do.

The command is the image's entrypoint (`disagg operator`) plus the args the chart renders,
with the ports the chart's values choose; the process reaches the API emulator through
$KUBECONFIG, as it would reach a cluster. The emulator serves from this test's event loop,
so the process is driven with asyncio only (never a blocking wait).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.chart.chartkit import NAMESPACE, RELEASE, ROOT, load, parse, render_files
from tests.support.emulator import Emulator

DD = "disagg.dev/v1alpha1/disaggregateddeployments"
NS = "team-a"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _container(values: dict[str, Any]) -> dict[str, Any]:
    deploy = next(o for o in parse(render_files(load(), values)) if o["kind"] == "Deployment")
    container: dict[str, Any] = deploy["spec"]["template"]["spec"]["containers"][0]
    return container


async def _get(url: str) -> tuple[int, str]:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status, await resp.text()
    except aiohttp.ClientError:
        return 0, ""


async def _until(what: str, check: Any, timeout: float = 60.0) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        result = await check()
        if result:
            return result
        await asyncio.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def _port(container: dict[str, Any], name: str) -> int:
    return int(next(p["containerPort"] for p in container["ports"] if p["name"] == name))


@pytest.mark.parametrize("namespaced", [False, True], ids=["all-namespaces", "namespaced"])
async def test_rendered_operator_container_serves_probes_metrics_and_reconciles(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path, namespaced: bool
) -> None:
    values: dict[str, Any] = {"health": {"port": _free_port()}, "metrics": {"port": _free_port()}}
    if namespaced:
        values["watchNamespaces"] = [NS]
        emulator.put_object(
            "v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        )
    container = _container(values)
    args = _mount_root_key(values, container, tmp_path)
    disagg = str(Path(sys.executable).with_name("disagg"))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path)}
    log = tmp_path / "operator.log"  # a file, not a pipe: a full pipe would stall it
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(disagg, "operator", *args, env=env, stderr=sink)
    try:
        probe = container["livenessProbe"]["httpGet"]
        health = f"http://127.0.0.1:{_port(container, probe['port'])}{probe['path']}"

        async def healthy() -> bool:
            if proc.returncode is not None:  # died: fail now, with its own words
                raise AssertionError(f"operator exited {proc.returncode}: {log.read_text()}")
            return (await _get(health))[0] == 200

        await _until("liveness endpoint answers 200", healthy)
        code, text = await _get(f"http://127.0.0.1:{_port(container, 'metrics')}/metrics")
        assert code == 200 and "disagg_" in text

        body = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())
        body["metadata"] = {"name": "probe", "namespace": NS}
        emulator.put_object(DD, body)

        async def pods() -> bool:
            return len(emulator.objects_of("v1/pods", NS)) == 2

        await _until("the operator created both pods", pods)
        # The handshake key comes from the chart's root key, as the operator read it.
        import base64

        from disagg_operator.controller.rules.keys import derive

        secret = emulator.find("v1/secrets", NS, "probe-handshake")
        uid = emulator.find(DD, NS, "probe")["metadata"]["uid"]
        root = (tmp_path / "root-key").read_bytes()
        assert base64.b64decode(secret["data"]["hmac"]).decode() == derive(root, NS, "probe", uid)
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0, log.read_text()[-2000:]
    # It led through the chart's Lease (release namespace), and handed it back on SIGTERM.
    lease = emulator.find("coordination.k8s.io/v1/leases", NAMESPACE, RELEASE)
    assert lease is not None and lease["spec"]["leaseTransitions"] == 0
    assert "holderIdentity" not in lease["spec"]


def _mount_root_key(values: dict[str, Any], container: dict[str, Any], into: Path) -> list[str]:
    """The container's args with the chart's root key Secret 'mounted' under ``into``."""
    import base64

    objs = parse(render_files(load(), values))
    secret = next(o for o in objs if o["kind"] == "Secret")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "root-key")
    for key, data in secret["data"].items():
        (into / key).write_bytes(base64.b64decode(data))
    return [a.replace(mount["mountPath"], str(into)) for a in container["args"]]


HPU = {
    "name": "hpu",
    "bufferDevices": ["hpu", "cpu"],
    "acceleratorResource": "habana.ai/gaudi",
    "ucxTls": "rc,tcp,self",
}


def _mount_platforms(values: dict[str, Any], container: dict[str, Any], into: Path) -> list[str]:
    """The container's args with its platforms ConfigMap 'mounted' under ``into``."""
    objs = parse(render_files(load(), values))
    config = next(o for o in objs if o["kind"] == "ConfigMap")
    mount = next(m for m in container["volumeMounts"] if m["name"] == "platforms")
    for key, text in config["data"].items():
        (into / key).write_text(text)
    return [a.replace(mount["mountPath"], str(into)) for a in container["args"]]


async def test_platforms_from_values_let_the_operator_run_an_hpu_pool(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    values: dict[str, Any] = {
        "health": {"port": _free_port()},
        "metrics": {"port": _free_port()},
        "platforms": [HPU],
    }
    container = _container(values)
    args = _mount_platforms(values, container, tmp_path)
    args = _mount_root_key(values, {**container, "args": args}, tmp_path)
    disagg = str(Path(sys.executable).with_name("disagg"))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_path)}
    log = tmp_path / "operator.log"
    with log.open("wb") as sink:
        proc = await asyncio.create_subprocess_exec(disagg, "operator", *args, env=env, stderr=sink)
    try:
        body = yaml.safe_load((ROOT / "examples" / "heterogeneous-gpu-cpu.yaml").read_text())
        body["metadata"] = {"name": "gaudi", "namespace": NS}
        body["spec"]["prefill"] = {
            "device": "hpu",
            "acceleratorMemory": "24Gi",  # sizes the host copy a cpu buffer keeps
            "nixlVersion": "1.5.0",  # the decode's
            "resources": {"limits": {"habana.ai/gaudi": 1, "memory": "24Gi"}},
        }
        emulator.put_object(DD, body)

        async def prefill_pod() -> Any:
            if proc.returncode is not None:
                raise AssertionError(f"operator exited {proc.returncode}: {log.read_text()}")
            pods = emulator.objects_of("v1/pods", NS)
            return next((p for p in pods if "prefill" in p["metadata"]["name"]), None)

        pod = await _until("the operator created the hpu prefill pod", prefill_pod)
        container = pod["spec"]["containers"][0]
        assert container["resources"]["limits"]["habana.ai/gaudi"] == 1
        assert {"name": "UCX_TLS", "value": "rc,tcp,self"} in container["env"]
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 30)
    assert proc.returncode == 0, log.read_text()[-2000:]
