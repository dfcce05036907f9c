"""What a local run asks of an engine: how its pods' engine command runs as a process on
this host, how it is waited for, the local image that stands for its rendered one, and its
aggregated baseline. One module per engine beside this one implements :class:`LocalEngine`.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from disagg_operator import __version__

LOCAL_REGISTRY = "ghcr.io/disagg-dev"  # where `make images` tags what it builds


@dataclass(frozen=True)
class LocalRun:
    """How a local run waits for the engine's pods and warms them up.

    ``readiness``: "ready-line" (the process prints the ports it bound as a JSON line) or
    "health" (``GET /health`` answers 200 on the port it was given); ``warm_up``: send one
    plain completion to each engine before any P/D request, and one P/D request through
    the proxy before serving; ``figures``: where the transfer figures of a request come
    from, the proxy's "response" or the decode "engine-log"; ``cores``: each pod takes an
    explicit core list of its own (as a node's CPU manager would give it); ``label``: how
    its start-up lines name it; ``groups``: the local run plays LeaderWorkerSet's part for
    its instances that span pods (:mod:`disagg_tools.local.rules.groups`); ``requires``:
    the Python modules its processes import that an install may lack, and ``install``
    the step that adds them (the local preflight names it before anything starts)."""

    start_timeout_s: float
    readiness: Literal["ready-line", "health"]
    warm_up: bool
    figures: Literal["response", "engine-log"]
    cores: bool = False
    label: str = ""
    groups: bool = False
    requires: tuple[str, ...] = ()
    install: str = ""


@dataclass(frozen=True)
class LocalProcess:
    """A pod's engine command adapted to run as a process on this host."""

    argv: list[str]
    env: dict[str, str]
    http_port: int
    adapted: list[str] = field(default_factory=list)
    events: str = ""  # where its KV events are read (tcp://HOST:PORT), if it publishes them


class LocalEngine:
    """The local-run part of one engine, named as ``spec.engine.type`` names it."""

    name: ClassVar[str]
    run: ClassVar[LocalRun]

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
        """Pod ``name``'s engine command as a process on this host, listening at the pod's
        ``address`` with the rendered ports, as in a cluster. ``cores``: the pod's own core
        list (empty: the rendered binding stays). ``host_ports``: free ports of this host
        for what the engine binds on every address (two pods' such binds would collide
        here; None: the rendered ports). ValueError naming what cannot run here."""
        raise NotImplementedError(f"cannot run engine {self.name!r} pods here")

    def image(self, image: str) -> str:
        """The image `make images` builds that stands for a rendered ``image`` of this
        engine (scripts/images.sh names them so): by default the worker image (the
        reference engine, the canary)."""
        return f"{LOCAL_REGISTRY}/disagg-worker-cpu:{__version__.split('+')[0]}"

    def aggregated(self, command: Sequence[str]) -> list[str]:
        """A decode pod's engine command without its KV connector: the aggregated engine a
        P/D run is judged against. By default the command as rendered."""
        return list(command)


def disagg_argv(args: Sequence[str]) -> list[str]:
    """The `disagg` command as this interpreter runs it (no reliance on PATH)."""
    return [sys.executable, "-m", "disagg_operator.cli", *args]


def without_flag(args: Sequence[str], flag: str) -> list[str]:
    """``args`` less ``flag VALUE`` and ``flag=VALUE`` (a rendered command, adapted)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out
