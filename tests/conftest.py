"""Fixtures shared across the suites: the API emulator over real HTTP and a kubeconfig for
it, and the Helm chart loaded once.

kmock and helm-python-sdk are required dev dependencies, imported plainly: a missing one
fails the run at collection, never turns a folder of tests into one silent skip."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import kmock
import pytest

from tests.chart import chartkit
from tests.support.emulator import (
    ApiCall,
    Emulator,
    api_calls,
    serve_project_crds,
    write_kubeconfig,
)

# A skip outside a marker gate fails the run (tests/support/skipgate.py); pytester runs
# that plugin's own test.
pytest_plugins = ["tests.support.skipgate", "pytester"]


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


@pytest.fixture(scope="session")
def chart() -> Any:
    """The chart in charts/disagg, loaded by the embedded Helm."""
    return chartkit.load()
