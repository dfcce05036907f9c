"""Fixtures for the engine suites: real `disagg worker serve` processes on 127.0.0.1.

Each worker binds port 0 and announces its ports on its ready line; every process group is
stopped at teardown, whatever the test did.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from disagg_tools.local.children import Child, disagg_argv, start_child, stop_children, wait_ready


def post(url: str, body: dict[str, Any], timeout: float = 120) -> tuple[int, dict[str, Any]]:
    """POST JSON; (status, body) for success and HTTP errors alike."""
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def stream(url: str, body: dict[str, Any], timeout: float = 120) -> tuple[int, list[Any], Any]:
    """POST with ``stream: true``; (status, the SSE events' data decoded, headers). An error
    answered before the stream starts gives its JSON body as the one event."""
    data = json.dumps({**body, "stream": True}).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            events: list[Any] = []
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if line.startswith("data: "):
                    payload = line[len("data: ") :]
                    events.append(payload if payload == "[DONE]" else json.loads(payload))
                else:
                    assert line == "", line
            return resp.status, events, resp.headers
    except urllib.error.HTTPError as e:
        return e.code, [json.load(e)], e.headers


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        raw = resp.read().decode()
    return json.loads(raw) if raw.startswith("{") else raw


def metric(text: str, name: str) -> float:
    """Value of one sample line of a Prometheus text page (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


StartWorker = Callable[..., Child]


class Workers:
    """Worker and proxy processes of one test (or module), all stopped by :meth:`stop`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []
        self._base = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}

    def spawn(self, role: str, name: str | None = None, **settings: Any) -> Child:
        """Start a worker without waiting; settings are DISAGG_* fields."""
        name = name or f"{role}-{len(self.children)}"
        env = {
            **self._base,
            "DISAGG_ROLE": role,
            "DISAGG_ENGINE_ID": name,
            "DISAGG_HTTP_PORT": "0",
            "DISAGG_SIDE_CHANNEL_PORT": "0",
            **{f"DISAGG_{k.upper()}": str(v) for k, v in settings.items()},
        }
        child = start_child(name, disagg_argv("worker", "serve"), env, self.log_dir)
        self.children.append(child)
        return child

    @staticmethod
    def ready(*children: Child) -> None:
        for child in children:
            wait_ready(child, timeout_s=120)
            child.url = f"http://127.0.0.1:{child.ready['http_port']}"  # type: ignore[attr-defined]

    def worker(self, role: str, name: str | None = None, **settings: Any) -> Child:
        child = self.spawn(role, name, **settings)
        self.ready(child)
        return child

    def proxy(self, prefill: list[str], decode: list[str], *flags: str) -> str:
        argv = disagg_argv("proxy", "--port", "0", "--prefill", *prefill, "--decode", *decode)
        name = f"proxy-{len(self.children)}"
        child = start_child(name, [*argv, *flags], self._base, self.log_dir)
        self.children.append(child)
        return f"http://127.0.0.1:{wait_ready(child, timeout_s=60)['http_port']}"

    def stop_one(self, child: Child) -> None:
        stop_children([child])
        self.children.remove(child)

    def stop(self) -> None:
        stop_children(self.children)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    group = Workers(tmp_path)
    yield group
    group.stop()


@pytest.fixture
def start_worker(workers: Workers) -> StartWorker:
    """start_worker(role, name=None, **DISAGG_settings) → a ready Child with .url."""
    return workers.worker


@pytest.fixture
def start_proxy(workers: Workers) -> Callable[..., str]:
    """start_proxy(prefill_urls, decode_urls, *flags) → the proxy's base URL."""
    return workers.proxy


def wait_until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``check`` until true; fail naming ``what`` after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout_s}s")
        time.sleep(0.1)
