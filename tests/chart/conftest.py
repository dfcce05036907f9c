"""Fixtures for the Helm chart tests (helpers in chartkit.py; the ``chart`` itself is a
root fixture: the docs tests read it too)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.chart import chartkit

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def render(chart: Any) -> Render:
    """``render(values)`` → the list of objects the chart produces for those values."""
    return lambda values=None: chartkit.parse(chartkit.render_files(chart, values))
