"""Fixtures for the Helm chart tests (helpers in chartkit.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("helm_python", reason="chart tests need the dev extra (helm-python-sdk)")

from tests.unit.chart import chartkit

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def chart() -> Any:
    return chartkit.load()


@pytest.fixture(scope="session")
def render(chart: Any) -> Render:
    """``render(values)`` → the list of objects the chart produces for those values."""
    return lambda values=None: chartkit.parse(chartkit.render_files(chart, values))
