"""llm-d's routing sidecar (the pd-sidecar of llm-d-router): the command line the operator
renders for it and the flags a spec may not pass.

Pure layer, the one source of truth for this external contract: render, validation and the
docs read it. Source: llm-d/llm-d-router ``pkg/sidecar/proxy/options.go`` at v0.10.0, and its
own decode manifests (``deploy/components/vllm-decode/deployment.yaml``), which pass
``--port=8000`` and ``--secure-proxy=false``. v0.10.0 removed ``--connector`` (use
``--kv-connector``, since v0.7.0) and deprecated ``--vllm-port`` for ``--model-server-port``
(RELEASE-NOTES.md, pull requests 2054 and 2142); the image moved from
``llm-d-routing-sidecar`` to ``llm-d-router-disagg-sidecar``.
"""

from __future__ import annotations

MIN_VERSION = "v0.10.0"
# What the sidecar answers 200 on once it serves (pkg/sidecar/proxy/proxy.go, createRoutes):
# its readiness, so a decode pod is not Ready before the pod's port listens.
HEALTH_PATH = "/health"
IMAGE_EXAMPLE = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{MIN_VERSION}"
# vLLM's NixlConnector, as the sidecar names its protocol.
KV_CONNECTOR = "nixlv2"

# Flags the operator sets → why a spec may not set them too.
DERIVED_FLAGS: dict[str, str] = {
    "--port": "the sidecar serves the pod's port, fixed at 8000",
    "--model-server-port": "the engine behind the sidecar listens on 8200",
    "--kv-connector": f"the engine's connector is NixlConnector ({KV_CONNECTOR})",
}
# Flags older sidecars took → what to write instead (refused: the v0.10.0 sidecar exits on
# an unknown flag, or would fight the derived value).
RETIRED_FLAGS: dict[str, str] = {
    "--connector": "removed in llm-d-router v0.10.0; the operator sets --kv-connector",
    "--vllm-port": "deprecated in llm-d-router v0.10.0; the operator sets --model-server-port",
    "--prefiller-use-tls": "removed in llm-d-router v0.10.0; use --enable-tls=prefiller",
    "--decoder-use-tls": "removed in llm-d-router v0.10.0; use --enable-tls=decoder",
    # in v0.9.0's options.go, gone from v0.10.0's (its list flag takes the stages)
    "--prefiller-tls-insecure-skip-verify": "removed in llm-d-router v0.10.0; use "
    "--tls-insecure-skip-verify=prefiller",
    "--decoder-tls-insecure-skip-verify": "removed in llm-d-router v0.10.0; use "
    "--tls-insecure-skip-verify=decoder",
}


def args(port: int, model_server_port: int) -> list[str]:
    """The sidecar's derived arguments. ``--secure-proxy=false``: the sidecar serves TLS
    with a self-signed certificate by default, while the InferencePool's targetPort speaks
    plain HTTP (appProtocol http) as the engine does; a spec may set it back to true."""
    return [
        f"--port={port}",
        f"--model-server-port={model_server_port}",
        f"--kv-connector={KV_CONNECTOR}",
        "--secure-proxy=false",
    ]


def flag_problem(arg: str) -> str | None:
    """Why ``arg`` (one entry of routingSidecar.args) is refused, or None."""
    name = arg.split("=", 1)[0]
    if name.startswith("-") and not name.startswith("--"):
        name = "-" + name  # Go flags accept -port as well as --port
    if name in DERIVED_FLAGS:
        return f"{name} is set by the operator: {DERIVED_FLAGS[name]}; remove it"
    if name in RETIRED_FLAGS:
        return f"{name} is {RETIRED_FLAGS[name]}; remove it"
    return None
