"""``--platforms-file`` on `disagg render` and `disagg operator`: declared pools render, bad
files stop the command with exit 2 and the field named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_contract import platforms
from disagg_operator.commands import render as render_cli
from tests.operator.builders import body, role

GAUDI = "habana.ai/gaudi"
HPU_FILE = f"""
- name: hpu
  bufferDevices: [hpu, cpu]
  acceleratorResource: {GAUDI}
  ucxTls: rc,tcp,self
"""
BAD_FILE = """
- name: hpu
  bufferDevices: []
"""


def _files(tmp_path: Path, platforms_text: str) -> tuple[str, str]:
    manifest = body(
        engine="vllm", prefill=role("hpu", resources={"limits": {GAUDI: 1}}), decode=role("cpu")
    )
    (tmp_path / "dd.yaml").write_text(yaml.safe_dump(manifest))
    (tmp_path / "platforms.yaml").write_text(platforms_text)
    return str(tmp_path / "dd.yaml"), str(tmp_path / "platforms.yaml")


def _pod(objects: list[dict[str, Any]], role_name: str) -> dict[str, Any]:
    return next(
        o
        for o in objects
        if o["kind"] == "Pod" and o["metadata"]["labels"]["disagg.dev/role"] == role_name
    )


def test_an_hpu_pool_from_the_file_renders_with_its_resource_and_transports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, platforms_file = _files(tmp_path, HPU_FILE)
    assert render_cli.main(["-f", manifest]) == 1
    assert "spec.prefill.device: unknown device 'hpu'" in capsys.readouterr().err

    assert render_cli.main(["-f", manifest, "--platforms-file", platforms_file]) == 0
    objects = list(yaml.safe_load_all(capsys.readouterr().out))
    container = _pod([o for o in objects if o], "prefill")["spec"]["containers"][0]
    assert container["resources"]["limits"][GAUDI] == 1
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["UCX_TLS"] == "rc,tcp,self"
    # the file's platforms lived in that render's settings, not in the process
    with pytest.raises(ValueError, match="unknown device 'hpu'"):
        platforms.get_platform("hpu")
    assert render_cli.main(["-f", manifest]) == 1


def test_render_refuses_a_bad_platforms_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest, platforms_file = _files(tmp_path, BAD_FILE)
    assert render_cli.main(["-f", manifest, "--platforms-file", platforms_file]) == 2
    err = capsys.readouterr().err
    assert "platforms[0].bufferDevices: must be a non-empty list" in err
    missing = str(tmp_path / "missing.yaml")
    assert render_cli.main(["-f", manifest, "--platforms-file", missing]) == 2
    assert "missing.yaml" in capsys.readouterr().err


def test_operator_exits_2_on_a_bad_platforms_file(tmp_path: Path) -> None:
    _, platforms_file = _files(tmp_path, BAD_FILE)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "disagg_operator.cli",
            "operator",
            "--platforms-file",
            platforms_file,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "KUBECONFIG": str(tmp_path / "no-cluster")},
    )
    assert result.returncode == 2, result.stderr
    assert "platforms[0].bufferDevices" in result.stderr
    assert "Traceback" not in result.stderr
