"""A vLLM engine's waiting processes wait instead of spinning: put this folder first on the
engine's PYTHONPATH. Two loops burn a core each on a CPU pool, and one pin moves the model
onto a single CPU; this module changes how each loop waits and undoes the pin for the
model's thread, nothing else:

- NIXL's progress thread. NIXL's Python API (``nixl_agent``) sets ``pthrDelay = 0`` on
  every agent's config, so the thread polls the UCX worker's event fd with a zero timeout
  and never sleeps: an idle engine burns a core. When NIXL's ``_bindings`` module is
  imported, its ``nixlAgent`` constructor is wrapped to raise a zero ``pthrDelay`` to
  ``DISAGG_NIXL_PROGRESS_DELAY_US`` (default 5000 microseconds): the thread then blocks on
  the fd, woken by UCX events, and looks again at least that often.
- vLLM's shared-memory message queue. After each message, the engine-core process (waiting
  for its workers' results) and each worker (waiting for the next step) check the queue in
  a ``sched_yield`` loop for a second before they block on a socket (``SpinCondition`` in
  ``shm_broadcast``, a fixed second): between requests, and through a whole request, a core
  per waiting process. With ``DISAGG_VLLM_QUEUE_POLL_US`` set, a waiting reader blocks
  during that second on the socket vLLM's writer notifies after every message (the one
  vLLM's own wait uses after the second), so it wakes when a message comes; it checks the
  queue again after that long at most at first, later after a fiftieth of its wait so far
  (at most 2 ms), notified or not. After the second, vLLM's own blocking wait is
  unchanged. The queue's data path is untouched, so no message can be missed: a lost
  notification only delays a check, by at most the pause.
- vLLM's NIXL worker pin (CPU pools, vLLM >= 0.17). When the NIXL connector's worker is
  built it pins the calling thread to the highest CPU of each NUMA node of the host
  (``os.sched_setaffinity(0, ...)``, meant to keep KV transfers off the model's cores). The
  calling thread is the worker's main thread, which also runs the model: after the pin the
  OpenMP master thread computes on that one CPU, whatever the pod's CPU binding said, and
  every engine on a node computes on the same CPU. With ``DISAGG_VLLM_KEEP_CPU_AFFINITY=1``
  the main thread gets its own CPUs back once the connector is built (a thread started
  inside keeps the pin; in vLLM 0.32 there is none: NIXL's agent and its progress thread
  come before the pin, the handshake pool's threads later), and a pin the kernel refuses
  (an exclusive cpuset without that CPU, where vLLM fails to start with EINVAL) is
  skipped.

Standalone on purpose: it runs inside the engine's image, which has no disagg package.
An image's own ``sitecustomize`` (later on ``sys.path``) still runs after this one.
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
