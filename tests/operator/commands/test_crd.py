"""`disagg crd -o yaml|json`: the file crds/ holds, or the same object as JSON."""

from __future__ import annotations

import json

import pytest
import yaml

from disagg_operator.commands import crd as command
from disagg_operator.render import crd


def test_yaml_is_the_committed_file_and_json_the_same_object(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert command.main([]) == 0
    default = capsys.readouterr().out
    assert command.main(["-o", "yaml"]) == 0
    as_yaml = capsys.readouterr().out
    assert default == as_yaml == crd.to_yaml()  # the file in crds/ (test_crd.py keeps it so)
    assert command.main(["-o", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert as_json == yaml.safe_load(as_yaml)
    assert as_json["kind"] == "CustomResourceDefinition"
