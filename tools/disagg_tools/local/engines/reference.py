"""The reference engine's pods run here: ``disagg worker serve`` as rendered, with the
worker's contract env, listening where this host lets it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from disagg_operator.api import HTTP_PORT
from disagg_tools.local.engines.base import LocalEngine, LocalProcess, LocalRun, disagg_argv

LOCAL_HOST = "127.0.0.1"
POD_HOSTS = ("DISAGG_HTTP_HOST", "DISAGG_SIDE_CHANNEL_HOST", "DISAGG_ADVERTISE_HOST")
# One host: every listener on 127.0.0.1, port 0 (the worker announces what it bound)
LOCAL_ENV = {
    **dict.fromkeys(POD_HOSTS, LOCAL_HOST),
    "DISAGG_HTTP_PORT": "0",
    "DISAGG_METRICS_PORT": "0",  # none: one host, one port each
    "DISAGG_SIDE_CHANNEL_PORT": "0",
}


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
        ports: Iterator[int] | None,
        cores: Sequence[int],
        address: str | None = None,
    ) -> LocalProcess:
        """Listen on 127.0.0.1, port 0 (the worker announces what it bound), or on the
        pod's ``address`` with the rendered ports; the handshake key from a private file;
        ``disagg`` as this interpreter runs it."""
        if list(command[:3]) != ["disagg", "worker", "serve"]:
            shown = " ".join(command[:3]) or "its image entrypoint"
            raise ValueError(
                f"pod {name}: runs {shown!r}; disagg up runs the reference engine's pods as "
                "rendered (disagg worker serve)"
            )
        hosts = LOCAL_ENV if address is None else dict.fromkeys(POD_HOSTS, address)
        local = {**env, **hosts, "DISAGG_HMAC_SECRET_PATH": secret_path}
        port = 0 if address is None else int(env.get("DISAGG_HTTP_PORT", HTTP_PORT))
        return LocalProcess(disagg_argv(command[1:]), local, port)
