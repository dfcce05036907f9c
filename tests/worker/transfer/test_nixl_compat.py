"""NIXL shim: UCX settings exported before the backend starts; NIXL's log kept off stdout."""

from __future__ import annotations

import logging
import sys

import pytest

from disagg_worker.transfer.nixl_compat import apply_ucx_env, nixl_api


def test_ucx_settings_are_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UCX_TLS", raising=False)
    monkeypatch.delenv("UCX_RNDV_THRESH", raising=False)
    apply_ucx_env("tcp,self", {"UCX_RNDV_THRESH": "8k"})
    import os

    assert os.environ["UCX_TLS"] == "tcp,self" and os.environ["UCX_RNDV_THRESH"] == "8k"


def test_nixl_log_is_quiet_and_on_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NIXL_LOG_LEVEL", raising=False)
    api = nixl_api()
    assert hasattr(api, "nixl_agent")
    logger = logging.getLogger("nixl")
    assert logger.level >= logging.WARNING
    streams = [h.stream for h in logger.handlers if isinstance(h, logging.StreamHandler)]
    assert sys.stdout not in streams
