"""Helm lint (strict) and upstream Kubernetes schema validation of every rendered object."""

from __future__ import annotations

import helm_python
import kubernetes_validate
import pytest

from tests.chart.chartkit import CHART, VALUE_SETS

KUBE_VERSION = "1.31.0"
CUSTOM_KINDS = {"ServiceMonitor"}  # no upstream schema; test_render checks its shape


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_lint_strict_has_no_warnings(name):
    report = helm_python.lint(CHART, VALUE_SETS[name], strict=True)
    assert report["errors"] == []
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert problems == []


def test_lint_reports_invalid_values():
    report = helm_python.lint(CHART, {"logLevel": "loud"}, strict=True)
    assert any("/logLevel" in e for e in report["errors"])


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_every_object_is_valid_against_upstream_schemas(render, name):
    objs = render(VALUE_SETS[name])
    checked = 0
    for obj in objs:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        # Strict: unknown fields are errors, not silently dropped by the API server.
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 5


def test_validation_is_strict_enough_to_catch_a_typo(render):
    """Guards the check above: a misspelt field must fail, or the test proves nothing."""
    deploy = next(o for o in render() if o["kind"] == "Deployment")
    deploy["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deploy, KUBE_VERSION, strict=True)
