"""The toy engine's local-run part (:mod:`disagg_tools.local.engines`' seam): its server
as a process of this interpreter at the pod's address."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

from disagg_tools.local.engines import LocalEngine, LocalProcess, LocalRun


class ToyLocal(LocalEngine):
    name = "toy"
    run = LocalRun(start_timeout_s=10.0, readiness="health", warm_up=False, figures="response")

    def process(
        self,
        name: str,
        command: Sequence[str],
        env: dict[str, str],
        *,
        secret_path: str,
        address: str,
        cores: Sequence[int] = (),
        host_ports: Iterator[int] | None = None,
    ) -> LocalProcess:
        argv = [sys.executable, "-m", "tests.support.toy_engine.server", *command[1:]]
        port = int(argv[argv.index("--listen") + 1])
        return LocalProcess([*argv, "--host", address], env, port, ["toy-serve"])
