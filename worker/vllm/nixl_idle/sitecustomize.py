"""NIXL's progress thread waits instead of spinning, in a process that creates agents
with the default configuration (vLLM's NixlConnector): put this folder first on the
engine's PYTHONPATH.

Standalone on purpose: it runs inside the engine's image, which has no disagg package.
NIXL's Python API (``nixl_agent``) sets ``pthrDelay = 0`` on every agent's config, so its
progress thread polls the UCX worker's event fd with a zero timeout and never sleeps: an
idle vLLM engine burns a core. When NIXL's ``_bindings`` module is imported, this wraps
its ``nixlAgent`` constructor to raise a zero ``pthrDelay`` to
``DISAGG_NIXL_PROGRESS_DELAY_US`` (default 1000 microseconds): the thread then blocks on the fd,
woken by UCX events, and looks again at least every millisecond. Nothing else changes.
An image's own ``sitecustomize`` (later on ``sys.path``) still runs after this one.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

DELAY_ENV = "DISAGG_NIXL_PROGRESS_DELAY_US"
MODULES = ("nixl._bindings", "nixl_cu12._bindings", "nixl_cu13._bindings")
applied: list[int] = []  # the delay given to each agent created (read by tests)


def patch(bindings: ModuleType, delay_us: int) -> None:
    """Wrap ``bindings.nixlAgent`` so a config with a zero delay gets ``delay_us``."""
    original = bindings.nixlAgent
    if getattr(original, "_disagg_wrapped", False):
        return

    def agent(name: str, config: Any) -> Any:
        if getattr(config, "useProgThread", False) and config.pthrDelay == 0:
            config.pthrDelay = delay_us
        applied.append(int(config.pthrDelay))
        return original(name, config)

    agent._disagg_wrapped = True  # type: ignore[attr-defined]
    bindings.nixlAgent = agent  # type: ignore[attr-defined]


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, delay_us: int) -> None:
        self.inner, self.delay_us = inner, delay_us

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        patch(module, self.delay_us)


class _Finder(importlib.abc.MetaPathFinder):
    # Marks every copy of this finder: the module may be loaded twice (under two names),
    # and two finders asking each other would recurse forever.
    disagg_nixl_idle = True

    def __init__(self, delay_us: int) -> None:
        self.delay_us = delay_us

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in MODULES:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "disagg_nixl_idle", False) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, self.delay_us)
                return spec
        return None


def install(delay_us: int) -> None:
    """Patch NIXL's bindings now if imported, else when they are."""
    for name in MODULES:
        if name in sys.modules:
            patch(sys.modules[name], delay_us)
    if not any(getattr(f, "disagg_nixl_idle", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(delay_us))


def _chain() -> None:
    """Run the next ``sitecustomize`` on the path (the image's own), as if alone."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if os.path.abspath(entry or ".") == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_image_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


_delay = os.environ.get(DELAY_ENV, "1000")
if _delay.isdigit() and int(_delay) > 0:
    install(int(_delay))
_chain()
