"""scripts/e2e-kind.sh: parsed and its prerequisite checks run here; the real run needs
Docker and a kind cluster, so that test is marked ``cluster`` and never runs in CI."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chart.chartkit import CHART, ROOT

SCRIPT = ROOT / "scripts" / "e2e-kind.sh"


@pytest.mark.parametrize("name", ["e2e-kind.sh", "sync-chart-crds.sh"])
def test_scripts_parse_and_fail_fast(name):
    path = ROOT / "scripts" / name
    subprocess.run(["bash", "-n", str(path)], check=True)
    assert "set -euo pipefail" in path.read_text()
    assert os.access(path, os.X_OK), f"chmod +x scripts/{name}"


def test_e2e_kind_builds_targets_the_dockerfile_has():
    targets = set(re.findall(r"--target (\S+)", SCRIPT.read_text()))
    stages = set(re.findall(r"^FROM \S+ AS (\S+)$", (ROOT / "Dockerfile").read_text(), re.M))
    assert targets == {"operator", "worker-cpu", "worker-cuda"}
    assert targets <= stages


def test_quickstart_uses_the_worker_image_the_script_builds():
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    example = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())
    assert example["spec"]["engine"]["image"] == f"ghcr.io/disagg-dev/disagg-worker-cpu:{version}"


def _run_with_path(tmp_path: Path, tools: list[str]) -> subprocess.CompletedProcess[str]:
    """Run the script with a PATH holding only coreutils and stubs named ``tools``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "sed", "dirname", "grep", "cat", "env"):
        found = shutil.which(tool)
        assert found, tool
        (bindir / tool).symlink_to(found)
    for tool in tools:
        stub = bindir / tool
        stub.write_text("#!/bin/sh\nexit 1\n")  # installed, but nothing behind it
        stub.chmod(0o755)
    env = {"PATH": str(bindir), "HOME": str(tmp_path)}
    return subprocess.run(
        [str(bindir / "bash"), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )


def test_e2e_kind_names_every_missing_tool(tmp_path):
    run = _run_with_path(tmp_path, ["kubectl"])
    assert run.returncode == 1
    assert "missing: docker kind helm curl" in run.stderr


def test_e2e_kind_says_when_the_docker_engine_is_unreachable(tmp_path):
    run = _run_with_path(tmp_path, ["docker", "kind", "kubectl", "helm", "curl"])
    assert run.returncode == 1
    assert "engine is not reachable" in run.stderr


@pytest.mark.cluster
def test_e2e_kind_full_run_needs_docker_engine_and_kind():
    """Builds images, creates a kind cluster, installs, applies, sends one request."""
    subprocess.run(["bash", str(SCRIPT)], check=True, timeout=3600, env={**os.environ, "KEEP": "0"})
