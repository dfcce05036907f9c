"""`disagg render`: the manifest with or without ``-f``, ``-o yaml|json``, and a manifest
holding no DisaggregatedDeployment refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from disagg_operator.commands import render

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = str(ROOT / "examples" / "quickstart-cpu.yaml")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = render.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_manifest_with_or_without_f_renders_the_same(capsys: pytest.CaptureFixture[str]):
    with_f = _run(["-f", QUICKSTART], capsys)
    without = _run([QUICKSTART], capsys)
    assert with_f[0] == without[0] == 0
    assert with_f[1] == without[1]
    kinds = [doc["kind"] for doc in yaml.safe_load_all(with_f[1]) if doc]
    assert kinds.count("Pod") == 2 and "Secret" in kinds


def test_yaml_and_json_hold_the_same_objects(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([QUICKSTART], capsys)  # yaml by default
    assert code == 0 and out.startswith("# Rendered offline")
    as_yaml = [doc for doc in yaml.safe_load_all(out) if doc]
    code, out, err = _run([QUICKSTART, "-o", "json"], capsys)
    assert code == 0 and "placeholder uid" in err  # the note goes where JSON is not
    as_json = json.loads(out)
    assert as_json["apiVersion"] == "v1" and as_json["kind"] == "List"
    assert as_json["items"] == as_yaml
    assert _run([QUICKSTART, "-o", "yaml"], capsys)[1].startswith("# Rendered offline")


@pytest.mark.parametrize(
    "text", ["", "---\n", "# nothing here\n", "apiVersion: v1\nkind: ConfigMap\n"]
)
def test_a_manifest_without_a_deployment_exits_1_naming_the_fix(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    code, out, err = _run(["-f", str(path)], capsys)
    assert code == 1 and out == ""
    assert err.splitlines() == [
        f"disagg render: {path} holds no DisaggregatedDeployment; give a manifest of "
        "kind: DisaggregatedDeployment (e.g. examples/quickstart-cpu.yaml)"
    ]


def test_through_the_disagg_command_an_empty_stdin_fails() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "disagg_operator.cli", "render", "-"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "holds no DisaggregatedDeployment" in done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
