"""The toy engine's operator plugin: ``toy-serve --role ROLE --listen PORT``, no side
channel, and its own P/D protocol (:mod:`.pd`), which the router and the canary are told
by ``--pd-protocol``."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import ClassVar

from disagg_operator.api import DeploymentSpec
from disagg_operator.engines.base import Container, DemandSeries, Engine, LocalProcess, LocalRun
from disagg_operator.engines.settings import Settings


class Toy(Engine):
    name: ClassVar[str] = "toy"
    summary: ClassVar[str] = "a test engine with its own P/D protocol"
    pd_protocol: ClassVar[str] = "tests.support.toy_engine.pd:PROTOCOL"
    local = LocalRun(start_timeout_s=10.0, readiness="health", warm_up=False, figures="response")
    demand = DemandSeries("toy_prompt_total", "toy_output_total", "toy_requests_total",
                          "toy_running")  # fmt: skip

    def container(
        self, spec: DeploymentSpec, role: str, port: int, settings: Settings
    ) -> Container:
        return Container(["toy-serve", "--role", role, "--listen", str(port)], [])

    def side_channel_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        return []

    def drain_seconds(self, spec: DeploymentSpec) -> int:
        return 2  # its KV waits for a decode only within one request

    def local_process(
        self,
        name: str,
        command: Sequence[str],
        env: dict[str, str],
        *,
        secret_path: str,
        ports: Iterator[int] | None,
        cores: Sequence[int],
        address: str | None = None,
    ) -> LocalProcess:
        argv = [sys.executable, "-m", "tests.support.toy_engine.server", *command[1:]]
        port = int(argv[argv.index("--listen") + 1])
        if address is None:  # one host: a port of its own
            port = next(ports) if ports else port
            argv[argv.index("--listen") + 1] = str(port)
        else:
            argv += ["--host", address]
        return LocalProcess(argv, env, port, ["toy-serve"])
