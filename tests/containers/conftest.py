"""The images `make images` builds, run by podman (``make test-containers``).

Every test here is marked ``containers``: it needs podman and the three images (the
operator, worker-cpu and the vLLM CPU engine). A missing image fails with the command
that builds it, never a skip. Containers run with the project's podman settings
(images/containers.conf), as the rendered pods run them: uid 65532, a read-only root,
no capabilities, no privilege escalation; each is removed after its test.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = os.environ.get("REGISTRY", "ghcr.io/disagg-dev")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
VLLM_VERSION = next(
    line.split("=", 1)[1]
    for line in (ROOT / "Dockerfile").read_text().splitlines()
    if line.startswith("ARG VLLM_VERSION=")
)
IMAGES = {
    "operator": f"{REGISTRY}/disagg-operator:{VERSION}",
    "worker-cpu": f"{REGISTRY}/disagg-worker-cpu:{VERSION}",
    "vllm-cpu": f"{REGISTRY}/disagg-vllm-cpu:{VLLM_VERSION}",
}
# what a rendered pod's securityContext asks of the runtime
HARDENED = [
    "--user=65532:65532",
    "--read-only",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--tmpfs=/tmp:rw,size=256m",
]


def podman(
    *args: str, timeout: float = 300, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "images" / "containers.conf")}
    done = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="session")
def images() -> dict[str, str]:
    for image in IMAGES.values():
        if podman("image", "exists", image, check=False).returncode != 0:
            raise AssertionError(f"{image} is not built: run `make images`")
    return IMAGES


@pytest.fixture
def container_name() -> Iterator[str]:
    """A fresh container name, removed (with its container) after the test."""
    name = f"disagg-test-{uuid.uuid4().hex[:10]}"
    yield name
    podman("rm", "--force", "--ignore", name, check=False)
