"""A real Prometheus (Debian's ``prometheus``) scraping local pods as the Prometheus
Operator would from our PodMonitors.

I/O layer (a process, files), for the local kubelet's closed loop and the tests.
:func:`targets` is the pure half: PodMonitors and pods in, Prometheus ``file_sd`` groups
out, labelled as the Prometheus Operator labels a PodMonitor's targets
(:mod:`disagg_operator.contracts.prometheus`): ``job`` ``<namespace>/<monitor>``,
``namespace``, ``pod``, ``container``, ``endpoint`` (the port's name), and each of
``podTargetLabels`` under its sanitised name (``disagg.dev/role`` → ``disagg_dev_role``).
A pod is a target while it runs and has an address (Ready or not: the Prometheus Operator
keeps unready pods, which is how a saturated pod's metrics stay in view).
:class:`Prometheus` runs the process with one scrape job over the groups written to its
``file_sd`` file (it picks changes up within a second).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from disagg_operator.contracts import prometheus as contract

BINARY = "prometheus"
READY_S = 30.0


def _sanitised(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _selected(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    wanted = selector.get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def targets(
    monitors: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``file_sd`` groups for every endpoint of every PodMonitor (module docstring)."""
    groups: list[dict[str, Any]] = []
    for monitor in monitors:
        meta, spec = monitor["metadata"], monitor.get("spec") or {}
        namespace = meta.get("namespace", "default")
        for pod in pods:
            pmeta = pod["metadata"]
            labels = pmeta.get("labels") or {}
            address = (pod.get("status") or {}).get("podIP")
            if pmeta.get("namespace", "default") != namespace or not address:
                continue
            if pmeta.get("deletionTimestamp") or not _selected(spec.get("selector") or {}, labels):
                continue
            for endpoint in spec.get("podMetricsEndpoints") or []:
                found = _port(pod, endpoint.get("port", ""))
                if found is None:
                    continue
                container, port = found
                group = {
                    "job": contract.job(namespace, meta["name"]),
                    "namespace": namespace,
                    "pod": pmeta["name"],
                    "container": container,
                    "endpoint": endpoint["port"],
                    "__metrics_path__": endpoint.get("path", "/metrics"),
                }
                for name in spec.get("podTargetLabels") or []:
                    if name in labels:
                        group[_sanitised(name)] = labels[name]
                groups.append({"targets": [f"{address}:{port}"], "labels": group})
    return groups


def _port(pod: Mapping[str, Any], name: str) -> tuple[str, int] | None:
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == name:
                return str(container["name"]), int(port["containerPort"])
    return None


def version() -> str:
    """``prometheus --version``'s first line's version ("" when it is not installed)."""
    if shutil.which(BINARY) is None:
        return ""
    out = subprocess.run([BINARY, "--version"], capture_output=True, text=True, check=False)
    words = (out.stdout or out.stderr).split()
    return words[2] if len(words) > 2 else ""


class Prometheus:
    """Debian's prometheus on 127.0.0.1 with one job over :meth:`write` 's groups."""

    def __init__(self, workdir: Path, scrape_interval: str = "1s") -> None:
        self.workdir, self.scrape_interval = workdir, scrape_interval
        self.sd = workdir / "targets.json"
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._written = ""

    def write(self, groups: list[dict[str, Any]]) -> None:
        """The targets now (a new file only when they changed; renamed into place)."""
        text = json.dumps(groups, sort_keys=True)
        if text == self._written:
            return
        staged = self.sd.with_suffix(".tmp")
        staged.write_text(text)
        staged.replace(self.sd)
        self._written = text

    async def start(self) -> None:
        if shutil.which(BINARY) is None:
            raise RuntimeError("prometheus is not installed: apt-get install prometheus")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.write([])
        config = {
            "global": {
                "scrape_interval": self.scrape_interval,
                "evaluation_interval": self.scrape_interval,
            },
            "scrape_configs": [
                {
                    "job_name": "podmonitors",  # each target's own job label wins
                    "file_sd_configs": [{"files": [str(self.sd)], "refresh_interval": "1s"}],
                }
            ],
        }
        (self.workdir / "prometheus.yml").write_text(json.dumps(config))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = (self.workdir / "prometheus.log").open("wb")
        self._proc = subprocess.Popen(
            [
                BINARY,
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_S
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited: see {self.workdir / 'prometheus.log'}")
                try:
                    async with http.get(self.url + "/-/ready") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.2)
        raise RuntimeError(f"prometheus not ready in {READY_S:g} s")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
