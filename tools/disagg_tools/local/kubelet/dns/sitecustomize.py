"""Cluster DNS for the pods the local kubelet runs as processes: put this folder first on
a pod's PYTHONPATH and name the kubelet's table in ``LOCAL_KUBELET_HOSTS_FILE``.

A cluster's pods resolve a Service's name through cluster DNS (a headless Service: one
address per ready pod; none, NXDOMAIN, while no pod is ready). On one host there is no
cluster DNS, so the kubelet writes what it would answer to a file (one line a name:
``name address...``) and this shim answers from it: ``socket.getaddrinfo`` (which
asyncio's and aiohttp's default resolvers call) gives a listed name its addresses, or
``EAI_NONAME`` for a listed name with none; every other name, and every name when the
variable is unset, resolves as before. The product's code resolves names the cluster's
way and knows nothing of this. The file is read again when it changes.

Standalone (the standard library only): a pod's process may run in an image that holds
the product alone. Then it runs the next ``sitecustomize`` on the path (an image's own,
or the vLLM idle shim), as if alone.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from typing import Any

ENV = "LOCAL_KUBELET_HOSTS_FILE"
_read: dict[str, tuple[tuple[int, int], dict[str, list[str]]]] = {}  # path → (stamp, table)


def table(path: str) -> dict[str, list[str]]:
    """The names in ``path`` and their addresses ({} when it cannot be read)."""
    try:
        info = os.stat(path)
    except OSError:
        return {}
    stamp = (info.st_mtime_ns, info.st_size)
    cached = _read.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    names: dict[str, list[str]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = line.split()
                if words and not words[0].startswith("#"):
                    names[words[0].rstrip(".").lower()] = words[1:]
    except OSError:
        return {}
    _read[path] = (stamp, names)
    return names


def listed(host: Any) -> list[str] | None:
    """``host``'s addresses from the table; None when it is not there (or no table)."""
    path = os.environ.get(ENV)
    if not path or not isinstance(host, str):
        return None
    return table(path).get(host.rstrip(".").lower())


def install() -> None:
    """Answer listed names from the table in ``socket.getaddrinfo`` (once)."""
    system = socket.getaddrinfo
    if getattr(system, "disagg_hosts_file", False):
        return

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        found = listed(host)
        if found is None:
            return system(host, port, *args, **kwargs)
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no address (no ready pod)")
        answers = []
        for address in found:
            answers += system(address, port, *args, **kwargs)
        return answers

    getaddrinfo.disagg_hosts_file = True  # type: ignore[attr-defined]
    socket.getaddrinfo = getaddrinfo


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path after this folder's, as if alone."""
    here = os.path.dirname(os.path.abspath(__file__))
    entries = [os.path.abspath(e or ".") for e in sys.path]
    after = entries[entries.index(here) + 1 :] if here in entries else entries
    for entry in after:
        candidate = os.path.join(entry, "sitecustomize.py")
        if entry != here and os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_next_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


# Once per process: a shim later on the path that runs the first other ``sitecustomize``
# it finds (the vLLM idle shim does) runs this one again; it then stops the chain there.
if not getattr(socket.getaddrinfo, "disagg_hosts_file", False):
    install()
    _chain()
