"""Fixtures for integration suites: the API emulator over real HTTP, and a kubeconfig for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

kmock = pytest.importorskip("kmock", reason="integration tests need the dev extra (kmock)")

from tests.integration.emulator import (  # noqa: E402
    ApiCall,
    Emulator,
    api_calls,
    serve_project_crds,
    write_kubeconfig,
)


@pytest.fixture()
async def emulator() -> AsyncIterator[Emulator]:
    """A fresh API emulator on 127.0.0.1 serving the built-in kinds and the project's CRDs."""
    async with Emulator() as emu, kmock.Server(emu):
        serve_project_crds(emu)
        yield emu


@pytest.fixture()
def kubeconfig_path(emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kubeconfig for the emulator, also exported as $KUBECONFIG for subprocesses."""
    path = write_kubeconfig(emulator, tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", str(path))
    return path


@pytest.fixture()
def emulator_calls(emulator: Emulator) -> Callable[..., list[ApiCall]]:
    """A callable returning the API calls recorded so far, as RBAC (verb, group, resource...)."""

    def calls(writes_only: bool = False) -> list[ApiCall]:
        return api_calls(emulator, writes_only=writes_only)

    return calls
