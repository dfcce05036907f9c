"""A vLLM engine's waiting processes wait instead of spinning: put this folder first on the
engine's PYTHONPATH. On a CPU pool NIXL's progress thread (``pthrDelay = 0``) and vLLM's
shared-memory queue readers (a second of ``sched_yield`` after every message) each burn a
model core, and vLLM's NIXL worker pins the model's thread to one CPU; this module changes
how each loop waits and undoes that pin, nothing else. Each setting, why and the figures:
docs/derivation.md (Notes). Standalone on purpose: it runs inside the engine's image, which
has no disagg package; an image's own ``sitecustomize`` (later on ``sys.path``) still runs.
"""

from __future__ import annotations

import errno
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

DELAY_ENV = "DISAGG_NIXL_PROGRESS_DELAY_US"
POLL_ENV = "DISAGG_VLLM_QUEUE_POLL_US"
AFFINITY_ENV = "DISAGG_VLLM_KEEP_CPU_AFFINITY"
NIXL_MODULES = ("nixl._bindings", "nixl_cu12._bindings", "nixl_cu13._bindings")
QUEUE_MODULE = "vllm.distributed.device_communicators.shm_broadcast"
# vLLM's NIXL connector worker classes whose constructor pins the calling thread
NIXL_WORKERS = {
    "vllm.distributed.kv_transfer.kv_connector.v1.nixl.base_worker": "NixlBaseConnectorWorker",
    "vllm.distributed.kv_transfer.kv_connector.v1.nixl_connector": "NixlConnectorWorker",
}
MAX_SLEEP_S = 0.002  # the longest sleep between two checks of vLLM's queue
applied: list[int] = []  # the delay given to each NIXL agent created (read by tests)


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


def patch_queue(module: ModuleType, poll_us: int) -> None:
    """Wrap ``SpinCondition.wait`` so a reader inside its busy window waits for the
    writer's notification instead of yielding: vLLM's writer sends one on the queue's
    socket after every message, and the reader blocks on it for at most ``poll_us`` at
    first, then a fiftieth of how long it has waited (at most ``MAX_SLEEP_S``), and checks
    the queue again either way. Outside the window (and for a class without these
    attributes) vLLM's own wait runs."""
    cls = getattr(module, "SpinCondition", None)
    original = getattr(cls, "wait", None)
    if cls is None or original is None or getattr(original, "_disagg_wrapped", False):
        return
    shortest = poll_us / 1e6
    noblock = getattr(getattr(module, "zmq", None), "NOBLOCK", 1)

    def wait(self: Any, timeout_ms: int | None = None) -> None:
        last, window = getattr(self, "last_read", None), getattr(self, "busy_loop_s", None)
        if getattr(self, "is_reader", False) and last is not None and window:
            waited = time.monotonic() - last
            if waited <= window:
                pause(self, min(max(shortest, waited / 50), MAX_SLEEP_S), noblock)
                return
        original(self, timeout_ms)

    wait._disagg_wrapped = True  # type: ignore[attr-defined]
    cls.wait = wait


def pause(condition: Any, seconds: float, noblock: int) -> None:
    """Block on the condition's notification socket for at most ``seconds`` (zmq's poll
    counts whole milliseconds: rounded up) and take the notification if one came; a
    cancellation is left for vLLM's reader to see. Without vLLM's poller, sleep."""
    poller = getattr(condition, "poller", None)
    notify = getattr(condition, "local_notify_socket", None)
    if poller is None or notify is None:
        time.sleep(seconds)
        return
    if notify in dict(poller.poll(timeout=math.ceil(seconds * 1000))):
        notify.recv(flags=noblock, copy=False)


def patch_pin(module: ModuleType, name: str) -> None:
    """Wrap ``module.<name>.__init__`` so the calling thread's CPU affinity after it is
    what it was before (threads started inside keep what they were given), and a pin the
    kernel refuses (EINVAL: none of its CPUs in the cpuset) is skipped."""
    cls = getattr(module, name, None)
    original = getattr(cls, "__init__", None)
    if cls is None or original is None or getattr(original, "_disagg_wrapped", False):
        return
    if not hasattr(os, "sched_getaffinity"):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        before = os.sched_getaffinity(0)
        pin = os.sched_setaffinity

        def guarded(pid: int, cpus: Any) -> None:
            try:
                pin(pid, cpus)
            except OSError as e:  # no CPU of it in the cpuset: vLLM would fail to start
                if pid != 0 or e.errno != errno.EINVAL:
                    raise

        os.sched_setaffinity = guarded
        try:
            original(self, *args, **kwargs)
        finally:
            os.sched_setaffinity = pin
            pin(0, before)

    init._disagg_wrapped = True  # type: ignore[attr-defined]
    cls.__init__ = init


class _Loader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, then: Callable[[ModuleType], None]) -> None:
        self.inner, self.then = inner, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        self.then(module)


class _Finder(importlib.abc.MetaPathFinder):
    # Marks every copy of this finder: the module may be loaded twice (under two names),
    # and two finders asking each other would recurse forever.
    disagg_engine_idle = True

    def __init__(self, patches: dict[str, Callable[[ModuleType], None]]) -> None:
        self.patches = patches

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        then = self.patches.get(name)
        if then is None:
            return None
        for finder in sys.meta_path:
            if getattr(finder, "disagg_engine_idle", False) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader, then)
                return spec
        return None


def install(delay_us: int = 0, poll_us: int = 0, keep_affinity: bool = False) -> None:
    """Patch the modules each non-zero setting applies to now if imported, else when
    they are."""
    patches: dict[str, Callable[[ModuleType], None]] = {}
    if delay_us > 0:
        patches.update({name: lambda m: patch(m, delay_us) for name in NIXL_MODULES})
    if poll_us > 0:
        patches[QUEUE_MODULE] = lambda m: patch_queue(m, poll_us)
    if keep_affinity:
        for module, cls in NIXL_WORKERS.items():
            patches[module] = functools.partial(patch_pin, name=cls)
    for name, then in patches.items():
        if name in sys.modules:
            then(sys.modules[name])
    if patches and not any(getattr(f, "disagg_engine_idle", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(patches))


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


def _setting(env: str, default: str) -> int:
    value = os.environ.get(env, default)
    return int(value) if value.isdigit() else 0


install(_setting(DELAY_ENV, "5000"), _setting(POLL_ENV, "0"), _setting(AFFINITY_ENV, "0") > 0)
_chain()
