"""Preflight of a local run: what would stop it, found before any process starts.

I/O layer: it reads the manifest and looks at this host (binds the proxy port on 127.0.0.1
for an instant, ``importlib.util.find_spec`` for the engine's modules, device files, PATH);
the verdict is :mod:`disagg_tools.local.rules.preflight`. It never imports torch or vLLM
(find_spec does not import), so it answers in a fraction of a second instead of a traceback
after the processes have started. Any command that starts pods here calls it first::

    from disagg_tools.local import preflight

    problems = preflight.check_file(path, port=8080, runtime="process")  # or check(docs, ...)
    if problems:
        preflight.fail(problems, prog="disagg up")  # one line each on stderr, exit status 2
    # or both at once: preflight.require(path, port=..., runtime=..., prog=...)

Each problem is a :class:`~disagg_contract.problems.Problem` (``str()``: "where: what is
wrong: the fix"). ``port=None`` checks no port; ``flag`` names the option that sets it.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import shutil
import socket
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import yaml

from disagg_contract.problems import Problem
from disagg_tools.local.rules.preflight import (
    SIGNS,
    Asked,
    Host,
    PortState,
    Request,
    asked,
    problems,
)

__all__ = ["EXIT_STATUS", "Problem", "check", "check_file", "fail", "require"]

EXIT_STATUS = 2  # as argparse's for a command line it refuses
LOOPBACK = "127.0.0.1"  # where the local proxy listens


def check(
    docs: Mapping[str, Any] | Iterable[Any],
    *,
    source: str = "the manifest",
    port: int | None = None,
    runtime: str = "process",
    flag: str = "--port",
) -> list[Problem]:
    """The problems of running ``docs`` (a manifest's YAML documents, or one
    DisaggregatedDeployment body) here with the proxy on ``port`` under ``runtime``."""
    one = isinstance(docs, Mapping)
    request = Request((docs,) if one else tuple(docs), source, port, runtime, flag)
    return problems(request, observe(asked(request)))


def check_file(
    path: str | os.PathLike[str],
    *,
    port: int | None = None,
    runtime: str = "process",
    flag: str = "--port",
) -> list[Problem]:
    """:func:`check` of the manifest at ``path``; a file that cannot be read or parsed is
    one problem, and the port and runtime are still checked."""
    source = str(path)
    docs, unreadable = _load(Path(path))
    request = Request(docs, source, port, runtime, flag)
    found = problems(request, observe(asked(request)))
    return [unreadable, *found] if unreadable is not None else found


def fail(found: Iterable[Problem | str], prog: str = "disagg up") -> NoReturn:
    """Print each problem as one line on stderr, then exit with :data:`EXIT_STATUS`."""
    for problem in found:
        print(f"{prog}: {' '.join(str(problem).splitlines())}", file=sys.stderr)
    sys.stderr.flush()
    raise SystemExit(EXIT_STATUS)


def require(
    path: str | os.PathLike[str],
    *,
    port: int | None = None,
    runtime: str = "process",
    flag: str = "--port",
    prog: str = "disagg up",
) -> None:
    """:func:`check_file`, then :func:`fail` when anything is wrong."""
    found = check_file(path, port=port, runtime=runtime, flag=flag)
    if found:
        fail(found, prog)


def observe(wanted: Asked) -> Host:
    """This host's answers to what the verdict needs."""
    return Host(
        port=None if wanted.port is None else port_state(wanted.port),
        modules=frozenset(m for m in wanted.modules if _installed(m)),
        devices=frozenset(d for d in wanted.devices if _shows(d)),
        programs=frozenset(p for p in wanted.programs if shutil.which(p)),
    )


def port_state(port: int) -> PortState | None:
    """Bind ``port`` on 127.0.0.1 for an instant, with SO_REUSEADDR as the proxy's server
    binds (asyncio's default), so a port a closed connection left in TIME_WAIT is free."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return "busy"
            if e.errno in (errno.EACCES, errno.EPERM):
                return "denied"
            return None  # another failure: the run's own bind reports it
    return "free"


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install: as good as none
        return False


def _shows(device: str) -> bool:
    signs = SIGNS[device]
    return any(os.path.exists(p) for p in signs.paths) or any(
        shutil.which(p) for p in signs.programs
    )


def _load(path: Path) -> tuple[tuple[Any, ...] | None, Problem | None]:
    """The file's YAML documents, or None and the problem."""
    try:
        text = path.read_text()
    except OSError as e:
        fix = "give a manifest's path (e.g. examples/quickstart-cpu.yaml)"
        return None, Problem(str(path), f"cannot be read ({e.strerror or e}): {fix}")
    try:
        return tuple(yaml.safe_load_all(text)), None
    except yaml.YAMLError as e:
        return None, Problem(str(path), f"is not valid YAML ({_where(e)}): correct it there")


def _where(error: yaml.YAMLError) -> str:
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    return " ".join(str(error).split())
