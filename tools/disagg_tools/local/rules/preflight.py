"""What stops a local run before anything starts: the verdict of the preflight.

The facts about this host come in as a :class:`Host` (observed by
:mod:`disagg_tools.local.preflight`), and each check returns :class:`Problem` lines naming
the flag or field and the fix. The checks are the ones that otherwise surface late, as a
traceback from a started process: a busy or impossible proxy port, an engine whose Python
module is not installed, a pool on an accelerator this host lacks, a runtime program not on
PATH, a manifest with no DisaggregatedDeployment. Everything else in a manifest is the
operator's validation, run when the manifest renders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from disagg_contract.problems import Problem
from disagg_tools.local.engines import BUILTIN, LocalEngine

KIND = "DisaggregatedDeployment"
POOLS = ("prefill", "decode")
PORT_MAX = 65535
PRIVILEGED_BELOW = 1024
PortState = Literal["free", "busy", "denied"]


@dataclass(frozen=True)
class Signs:
    """How this host shows it has an accelerator: a device file or a vendor program."""

    hardware: str  # the fix names it: "a host with <hardware>"
    paths: tuple[str, ...]
    programs: tuple[str, ...]


# Accelerators a preflight can tell about; a pool on any other device (cpu aside) is left to
# the run, since no sign here would say it is missing.
SIGNS: Mapping[str, Signs] = {
    "cuda": Signs("an NVIDIA GPU", ("/dev/nvidia0",), ("nvidia-smi",)),
    "rocm": Signs("an AMD GPU", ("/dev/kfd",), ("rocm-smi", "amd-smi")),
}


@dataclass(frozen=True)
class Runtime:
    """A ``--runtime``: the program it drives (none for processes) and how to get it."""

    program: str | None
    install: str = ""


RUNTIMES: Mapping[str, Runtime] = {
    "process": Runtime(None),
    "podman": Runtime(
        "podman",
        "install it (`make images` does, as root, with runc, and builds the images the pods "
        "run; or apt-get install podman runc), or drop --runtime podman to run the pods as "
        "processes",
    ),
}


@dataclass(frozen=True)
class Host:
    """What this host has, as observed: ``port`` the state of the proxy port on 127.0.0.1
    (None: not probed), ``modules`` the importable ones among those asked, ``devices``
    the accelerators of :data:`SIGNS` it shows, ``programs`` those found on PATH."""

    port: PortState | None = None
    modules: frozenset[str] = frozenset()
    devices: frozenset[str] = frozenset()
    programs: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Request:
    """One run to check: its manifest's YAML documents (None: the manifest could not be
    read, which its reader reports) and where they came from (the file, named in the
    manifest's problems), the proxy port (None: no port to check) and the flag that sets
    it, the runtime."""

    docs: tuple[Any, ...] | None
    source: str
    port: int | None = None
    runtime: str = "process"
    flag: str = "--port"


@dataclass(frozen=True)
class Asked:
    """What to look up on this host before the verdict (see :func:`asked`)."""

    port: int | None = None
    modules: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()


def deployment(docs: Sequence[Any], source: str) -> tuple[Mapping[str, Any] | None, list[Problem]]:
    """The one DisaggregatedDeployment among a manifest's YAML documents, or the problem."""
    found = [d for d in docs if isinstance(d, Mapping) and d.get("kind") == KIND]
    if len(found) == 1:
        return found[0], []
    example = "examples/quickstart-cpu.yaml is one"
    if not any(d is not None for d in docs):
        return None, [Problem(source, f"is empty: write one {KIND} in it ({example})")]
    if not found:
        kinds = sorted({str(d.get("kind")) for d in docs if isinstance(d, Mapping)})
        held = f" (it holds: {', '.join(kinds)})" if kinds else ""
        return None, [Problem(source, f"holds no {KIND}{held}: add one ({example})")]
    names = ", ".join(str(_mapping(d.get("metadata")).get("name")) for d in found)
    fix = "a local run takes one: give each its own file"
    return None, [Problem(source, f"holds {len(found)} {KIND}s ({names}): {fix}")]


def port_problems(port: int, state: PortState | None, flag: str = "--port") -> list[Problem]:
    """The proxy port: in range (0 = any free port), and bindable on 127.0.0.1 now."""
    where, any_port = f"{flag} {port}", f"{flag} 0 (any free port)"
    if not 0 <= port <= PORT_MAX:
        return [Problem(where, f"is out of range: give 1..{PORT_MAX}, or {any_port}")]
    if state == "busy":
        what = f"127.0.0.1:{port} is in use by another process"
        return [Problem(where, f"{what}: pass {any_port} or another port, or stop that process")]
    if state == "denied":
        what = f"ports below {PRIVILEGED_BELOW} need root here"
        return [Problem(where, f"{what}: pass {any_port} or a port from {PRIVILEGED_BELOW} up")]
    return []


def probed_port(port: int | None) -> int | None:
    """The port worth binding to test it: none when absent, out of range or 0 (any)."""
    return port if port is not None and 0 < port <= PORT_MAX else None


def _engine(body: Mapping[str, Any], engines: Mapping[str, LocalEngine]) -> LocalEngine | None:
    engine = _mapping(_mapping(body.get("spec")).get("engine"))
    kind = engine.get("type")
    return engines.get(kind) if isinstance(kind, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def asked(request: Request, engines: Mapping[str, LocalEngine] = BUILTIN) -> Asked:
    """What to look up: the port to bind, the engine's modules (a process run imports them
    here; in containers the images hold them), the pools' accelerators, the runtime's
    program."""
    body = deployment(request.docs, request.source)[0] if request.docs is not None else None
    engine = _engine(body, engines) if body is not None else None
    process = request.runtime == "process"
    modules = engine.run.requires if engine is not None and process else ()
    devices = tuple(sorted({d for _, d in _devices(body)})) if body is not None else ()
    runtime = RUNTIMES.get(request.runtime)
    programs = (runtime.program,) if runtime is not None and runtime.program else ()
    return Asked(probed_port(request.port), modules, devices, programs)


def engine_problems(
    body: Mapping[str, Any], host: Host, runtime: str, engines: Mapping[str, LocalEngine] = BUILTIN
) -> list[Problem]:
    """A process run's engine modules that this install lacks."""
    engine = _engine(body, engines)
    if engine is None or runtime != "process":
        return []  # an engine with no local-run module is refused when the manifest renders
    missing = [m for m in engine.run.requires if m not in host.modules]
    return [
        Problem(
            "spec.engine.type",
            f"{engine.name} runs here with Python module {module!r}, which is not installed: "
            + (engine.run.install or f"install {module}"),
        )
        for module in missing
    ]


def device_problems(body: Mapping[str, Any], host: Host) -> list[Problem]:
    """Each pool on an accelerator of :data:`SIGNS` that this host shows no sign of."""
    out = []
    for pool, device in _devices(body):
        if device in host.devices:
            continue
        signs, where = SIGNS[device], f"spec.{pool}.device"
        seen = ", no ".join((*signs.paths, *(f"{p} on PATH" for p in signs.programs)))
        fix = f"set {where}: cpu, or run on a host with {signs.hardware}"
        out.append(Problem(where, f"{device}, but this host has no {seen}: {fix}"))
    return out


def _devices(body: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(pool, device) for each pool on an accelerator of :data:`SIGNS`."""
    spec = _mapping(body.get("spec"))
    found = [(pool, _mapping(spec.get(pool)).get("device")) for pool in POOLS]
    return [(pool, device) for pool, device in found if isinstance(device, str) and device in SIGNS]


def runtime_problems(runtime: str, host: Host) -> list[Problem]:
    """The runtime's program missing from PATH."""
    known = RUNTIMES.get(runtime)
    if known is None:
        known_ones = ", ".join(RUNTIMES)
        return [Problem("--runtime", f"{runtime!r} is not a runtime: give one of {known_ones}")]
    if known.program is None or known.program in host.programs:
        return []
    return [Problem(f"--runtime {runtime}", f"{known.program} is not on PATH: {known.install}")]


def problems(
    request: Request, host: Host, engines: Mapping[str, LocalEngine] = BUILTIN
) -> list[Problem]:
    """Every preflight problem of ``request`` on ``host``: the manifest's first, then the
    port's, the runtime's, the engine's and the pools' devices."""
    body: Mapping[str, Any] | None = None
    found: list[Problem] = []
    if request.docs is not None:
        body, found = deployment(request.docs, request.source)
    if request.port is not None:
        found += port_problems(request.port, host.port, request.flag)
    found += runtime_problems(request.runtime, host)
    if body is not None:
        found += engine_problems(body, host, request.runtime, engines)
        found += device_problems(body, host)
    return found
