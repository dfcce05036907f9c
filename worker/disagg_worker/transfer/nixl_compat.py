"""NIXL import shim: the one place that knows where the NIXL Python API lives.

I/O boundary layer. CUDA images ship the ``nixl`` meta package (``nixl._api``); CPU images
ship ``nixl-cu12`` only (``nixl_cu12._api``). Everything else imports NIXL through here.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from types import ModuleType
from typing import Any

_CANDIDATES = ("nixl._api", "nixl_cu12._api")
_cached: ModuleType | None = None


class NixlUnavailableError(ImportError):
    """Neither NIXL distribution is importable."""


def nixl_api() -> ModuleType:
    """The NIXL ``_api`` module (``nixl_agent``, ``nixl_agent_config``...)."""
    global _cached
    if _cached is not None:
        return _cached
    errors = []
    for name in _CANDIDATES:
        try:
            _cached = importlib.import_module(name)
        except ImportError as e:
            errors.append(f"{name}: {e}")
            continue
        _quiet_logging()
        return _cached
    raise NixlUnavailableError(
        "NIXL is not installed (" + "; ".join(errors) + "); install the worker extra: "
        "pip install 'disagg[worker]' (CPU: nixl-cu12, CUDA images: nixl)"
    )


def _quiet_logging() -> None:
    """NIXL's Python logger prints INFO to stdout, which corrupts ``--json`` output:
    warnings and up only (unless NIXL_LOG_LEVEL asks otherwise), and to stderr."""
    logger = logging.getLogger("nixl")
    if not os.getenv("NIXL_LOG_LEVEL"):
        logger.setLevel(logging.WARNING)
    for h in logger.handlers:
        if isinstance(h, logging.StreamHandler) and h.stream is sys.stdout:
            h.setStream(sys.stderr)


def apply_ucx_env(ucx_tls: str | None, ucx_env: dict[str, str]) -> None:
    """Export UCX settings before the UCX backend is created (UCX reads them then).

    Process-wide by nature: a worker process runs one agent. Unset values leave whatever
    the pod env already says (the operator renders UCX_TLS there). ``ucx_env`` holds UCX_*
    names only: WorkerConfig refuses any other key when the worker starts.
    """
    os.environ.update(ucx_env)
    if ucx_tls:
        os.environ["UCX_TLS"] = ucx_tls


def make_agent(name: str, *, threads: int = 0, telemetry: bool = True) -> Any:
    """A ``nixl_agent`` with no backend yet (see :func:`backend_params`): no NIXL listen
    thread (metadata travels over our own side channel), per-transfer telemetry on.

    No NIXL progress thread either: the Python API starts it with a zero delay, so it
    spins (measured: half a core per idle worker). UCX is progressed by the calls we make
    anyway: decode polls its transfers, prefill polls notifications every 2 ms (0.5 ms
    while it holds published blocks, when a decode may be reading).

    Thread sync: STRICT (one lock around every call) for a single-threaded data path, which
    is safe with our notification thread; RW when ``threads`` > 1, so that reads posted
    from several threads run in parallel while metadata changes stay exclusive.
    """
    api = nixl_api()
    sync = api.nixl_thread_sync_t
    config = api.nixl_agent_config(
        enable_prog_thread=False,
        enable_listen_thread=False,
        capture_telemetry=telemetry,
        backends=[],
        sync_mode=sync.NIXL_THREAD_SYNC_RW if threads > 1 else sync.NIXL_THREAD_SYNC_STRICT,
    )
    return api.nixl_agent(name, config)


def backend_params(backend: str, threads: int) -> dict[str, str]:
    """Init parameters giving ``backend`` ``threads`` workers. (NIXL's own config passes
    ``num_threads`` to UCX, which NIXL 1.5's UCX plugin does not list; its knob is
    ``num_workers``.)"""
    if threads <= 1:
        return {}
    key = {"UCX": "num_workers", "GDS_MT": "thread_count", "UCCL": "num_cpus"}.get(
        backend, "num_threads"
    )
    return {key: str(threads)}
