"""The reference engine's pods run here: ``disagg worker serve`` as rendered, with the
worker's contract env, listening at the pod's address."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from disagg_operator.api import HTTP_PORT
from disagg_tools.local.engines.base import LocalEngine, LocalProcess, LocalRun, disagg_argv

POD_HOSTS = ("DISAGG_HTTP_HOST", "DISAGG_SIDE_CHANNEL_HOST", "DISAGG_ADVERTISE_HOST")


class Reference(LocalEngine):
    name = "reference"
    run = LocalRun(
        start_timeout_s=120.0, readiness="ready-line", warm_up=False, figures="response",
        groups=True,
    )  # fmt: skip

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
        """Listen on the pod's ``address`` with the rendered ports; the handshake key from a
        private file; ``disagg`` as this interpreter runs it."""
        if list(command[:3]) != ["disagg", "worker", "serve"]:
            shown = " ".join(command[:3]) or "its image entrypoint"
            raise ValueError(
                f"pod {name}: runs {shown!r}; disagg up runs the reference engine's pods as "
                "rendered (disagg worker serve)"
            )
        local = {**env, **dict.fromkeys(POD_HOSTS, address), "DISAGG_HMAC_SECRET_PATH": secret_path}
        port = int(env.get("DISAGG_HTTP_PORT", HTTP_PORT))
        return LocalProcess(disagg_argv(command[1:]), local, port)
