"""values.yaml and values.schema.json: every key commented, bad values refused by path."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.chart.chartkit import CHART, FULL_VALUES, render_files


def test_every_top_level_key_has_a_comment():
    lines = (CHART / "values.yaml").read_text().splitlines()
    uncommented = []
    for i, line in enumerate(lines):
        if re.match(r"^[A-Za-z]\w*:", line):
            above = lines[i - 1] if i else ""
            if not above.startswith("#"):
                uncommented.append(line.split(":")[0])
    assert uncommented == []


def test_schema_accepts_defaults_and_full_values(chart):
    chart.validate_schema(yaml.safe_load((CHART / "values.yaml").read_text()))
    chart.validate_schema(FULL_VALUES)


def test_full_values_cover_every_key():
    """FULL_VALUES is the non-default test set: it must exercise every key of values.yaml."""

    def paths(tree: object, prefix: str = "") -> set[str]:
        if not isinstance(tree, dict) or not tree:
            return {prefix}
        out: set[str] = set()
        for key, value in tree.items():
            out |= paths(value, f"{prefix}.{key}" if prefix else key)
        return out

    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    leaves = {p for p in paths(defaults) if not p.startswith(("resources.", "rbac."))}
    missing = {p for p in leaves if p.split(".")[0] not in FULL_VALUES}
    assert missing <= {"nameOverride"}


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"logLevel": "loud"}, "/logLevel"),
        ({"watchNamespaces": ["Team_A"]}, "/watchNamespaces/0"),
        ({"watchNamespaces": ["a", "a"]}, "/watchNamespaces"),
        ({"metrics": {"port": 70000}}, "/metrics/port"),
        ({"image": {"pullPolicy": "Sometimes"}}, "/image/pullPolicy"),
        ({"metrics": {"serviceMonitor": {"interval": "soon"}}}, "/metrics/serviceMonitor/interval"),
        ({"watchNamespace": "a"}, "watchNamespace"),
        ({"replicaCount": 0}, "/replicaCount"),
        ({"leaderElection": {"leaseDurationSeconds": 2.5}}, "/leaderElection/leaseDurationSeconds"),
        ({"leaderElection": {"retryPeriodSeconds": 0}}, "/leaderElection/retryPeriodSeconds"),
        ({"platforms": [{"name": "hpu", "bufferDevices": []}]}, "/platforms/0/bufferDevices"),
        ({"platforms": [{"name": "Gaudi", "bufferDevices": ["hpu"]}]}, "/platforms/0/name"),
        ({"platforms": [{"name": "hpu", "bufferDevices": ["hpu"], "colour": 1}]}, "colour"),
    ],
)
def test_schema_refuses_bad_values_naming_the_key(chart, values, path):
    with pytest.raises(Exception, match=re.escape(path)):
        render_files(chart, values)
