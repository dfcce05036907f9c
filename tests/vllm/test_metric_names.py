"""The vLLM series the operator reads are defined by the installed vLLM (``make test-vllm``).

Those the vLLM engine declares for this version (its ``demand`` and ``alert_series``, from
the contract table) and those tests/operator/render/test_alerts.py restates as vLLM's
(:data:`VLLM_SERIES`, the newest row not above this version) are each looked up among the
metrics the installed vLLM's source defines: every ``name="vllm:..."`` given to a
Prometheus metric class (PrometheusStatLogger's and the KV connectors' ``_gauge_cls``,
``_counter_cls``, ``_histogram_cls``, or prometheus_client's classes), named as scraped.
The source is read, not imported: the definitions are what the engine registers once it
runs (tests/vllm/test_pd.py reads the autoscaler's from a running engine).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
from pathlib import Path

import pytest

from disagg_operator.engines.vllm import contract
from disagg_operator.engines.vllm.engine import Vllm
from disagg_operator.validation import spec as validation
from tests.operator.builders import GPU, body, role
from tests.operator.render.test_alerts import VLLM_SERIES, exposed
from tests.vllm.test_profile_contract import _installed

pytestmark = pytest.mark.vllm

# Where vLLM defines its Prometheus metrics: the stat loggers and the KV connectors.
FOLDERS = ("v1/metrics", "distributed/kv_transfer")
CLASSES = {
    "_gauge_cls": "gauge",
    "_counter_cls": "counter",
    "_histogram_cls": "histogram",
    "Gauge": "gauge",
    "Counter": "counter",
    "Histogram": "histogram",
}


def definitions(root: Path) -> dict[str, tuple[str, str]]:
    """Series as scraped → (metric type, file under ``root``) of every vLLM metric the
    source under ``root`` (a ``vllm`` package folder) defines."""
    found: dict[str, tuple[str, str]] = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            for call in ast.walk(ast.parse(path.read_text(), str(path))):
                kind = _metric_class(call)
                name = _name_keyword(call) if kind else None
                if kind and name:
                    where = f"vllm/{path.relative_to(root)}"
                    found.update({s: (kind, where) for s in exposed(kind, name)})
    return found


def _metric_class(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return CLASSES.get(called or "")


def _name_keyword(call: ast.AST) -> str | None:
    for keyword in getattr(call, "keywords", []):
        value = getattr(keyword.value, "value", None)
        if keyword.arg == "name" and isinstance(value, str) and value.startswith("vllm:"):
            return value
    return None


@pytest.fixture(scope="module")
def defined() -> dict[str, tuple[str, str]]:
    """The installed vLLM's metric definitions (its package folder, not imported)."""
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.submodule_search_locations, "vLLM is not installed"
    found = definitions(Path(next(iter(spec.submodule_search_locations))))
    assert "vllm:num_requests_running" in found  # the reader finds vLLM's own
    return found


def test_every_series_the_vllm_engine_declares_is_defined(
    defined: dict[str, tuple[str, str]],
) -> None:
    obj = body(
        engine="vllm", prefill=role("cuda", resources=GPU), decode=role("cuda", resources=GPU)
    )
    obj["spec"]["engine"]["version"] = _installed()
    dd, problems = validation.parse(obj)
    assert dd is not None and not problems, problems
    engine = Vllm()
    declared = {
        *dataclasses.astuple(engine.demand),
        *dataclasses.astuple(engine.alert_series(dd.spec)),
    } - {None}
    assert declared, "the vLLM engine declares no series"
    assert not declared - defined.keys(), sorted(declared - defined.keys())


def test_the_series_the_alert_tests_restate_are_defined_as_restated(
    defined: dict[str, tuple[str, str]],
) -> None:
    installed = contract.parse_version(_installed())
    assert installed is not None
    rows = {
        version: row
        for row in VLLM_SERIES
        if (version := contract.parse_version(row)) is not None and version <= installed
    }
    assert rows, f"no row of VLLM_SERIES for vLLM {_installed()}"
    for name, kind, where in VLLM_SERIES[rows[max(rows)]]:
        for series in exposed(kind, name):
            assert series in defined, f"{series} ({where}) is not defined by vLLM {installed}"
            # the type and the file restated
            assert defined[series][0] == kind and where.startswith(defined[series][1]), (
                series,
                where,
                defined[series],
            )
