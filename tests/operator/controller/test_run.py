"""``disagg operator`` as a process: kubeconfig login, liveness, metrics, clean SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import aiohttp

from tests.operator.conftest import DD_PATH, api, pods, quickstart, until
from tests.support.emulator import Emulator


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def fetch(url: str) -> str:
    try:
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return await resp.text() if resp.status == 200 else ""
    except aiohttp.ClientError:
        return ""


async def test_operator_process_serves_health_and_metrics_and_reconciles(
    emulator: Emulator, kubeconfig_path: Path
) -> None:
    health, prom = free_port(), free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "disagg_operator.cli",
        "operator",
        "--all-namespaces",
        "--health-port",
        str(health),
        "--metrics-port",
        str(prom),
        "--bind-address",
        "127.0.0.1",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await api(emulator, "POST", DD_PATH, quickstart())
        await until("pods from the process", lambda: len(pods(emulator)) == 2, timeout=60)
        metrics_url = f"http://127.0.0.1:{prom}/metrics"
        text = await until_async(metrics_url, "disagg_operator_api_writes_total")
        assert 'disagg_operator_api_writes_total{kind="Pod",verb="create"} 2.0' in text
        assert "disagg_operator_reconcile_seconds_bucket" in text
        # per deployment, from the operator's cache: what it wants and what it sees
        desired = 'disagg_deployment_replicas{deployment="demo",namespace="team-a",role="decode"'
        text = await until_async(metrics_url, desired + ',state="desired"} 1.0')
        assert desired + ',state="ready"} 0.0' in text  # nothing runs pods here
        assert (
            'disagg_deployment_rollout_in_progress{deployment="demo",namespace="team-a"} 1.0'
            in text
        )
        assert 'type="Ready"' in text and "disagg_deployment_transfer_path_ready{" in text
        assert await until_async(f"http://127.0.0.1:{health}/healthz", "")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert b"Traceback" not in err


async def until_async(url: str, needle: str, timeout: float = 30.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        text = await fetch(url)
        if text and needle in text:
            return text
        await asyncio.sleep(0.1)
    raise AssertionError(f"never served: {url} with {needle!r}")
