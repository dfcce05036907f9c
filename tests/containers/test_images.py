"""The built images, each run alone the way a rendered pod runs it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
from pathlib import Path

import pytest

from tests.containers.conftest import HARDENED, ROOT, podman
from tests.operator.conftest import DD_PATH, api, pods, quickstart, until
from tests.support.emulator import Emulator
from tests.support.scripts import load

ship = load("ship.py")

pytestmark = [pytest.mark.containers, pytest.mark.timeout(900)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_operator_image_alone_reconciles_a_deployment(
    images: dict[str, str], container_name: str, emulator: Emulator, kubeconfig_path: Path
) -> None:
    """`disagg operator` from the image, against the API emulator on this host's loopback
    (the container shares the host's network): a module missing from the wheel, or an
    operator that cannot log in from its kubeconfig, fails here."""
    health = _free_port()
    podman(
        "run", "--detach", "--name", container_name, "--network=host", *HARDENED,
        f"--volume={kubeconfig_path}:/etc/disagg/kubeconfig:ro",
        "--env=KUBECONFIG=/etc/disagg/kubeconfig",
        images["operator"],
        "--all-namespaces", "--bind-address=127.0.0.1",
        f"--health-port={health}", f"--metrics-port={_free_port()}",
    )  # fmt: skip
    try:
        await api(emulator, "POST", DD_PATH, quickstart())
        await until("pods from the operator's container", lambda: len(pods(emulator)) == 2, 120)
    finally:
        logs = podman("logs", container_name, check=False)
        await asyncio.to_thread(podman, "stop", "--time=30", container_name, check=False)
    state = json.loads(podman("inspect", container_name).stdout)[0]["State"]
    assert state["ExitCode"] == 0, logs.stdout[-2000:] + logs.stderr[-2000:]
    assert "Traceback" not in logs.stderr


def test_the_worker_image_moves_kv_blocks_over_nixl(images: dict[str, str]) -> None:
    """NIXL with UCX in the worker image: the transfer benchmark's two processes read
    blocks from each other, as uid 65532 with a read-only root and no capabilities."""
    done = podman(
        "run", "--rm", "--network=none", *HARDENED, images["worker-cpu"],
        "bench", "transfer", "--json", "--tokens=256", "--repeat=3",
        "--layout=block", "--post=prepped", "--modes=merged",
    )  # fmt: skip
    (case,) = json.loads(done.stdout)["cases"]
    assert case["bytes"] > 0 and case["gbps"] > 0 and case["ratio"] > 0, case


def test_the_vllm_image_imports_its_server_and_nixl(images: dict[str, str]) -> None:
    """The engine image's traps handled (scripts/vllm-cpu-finish.sh): vLLM's API server
    and NIXL's shim import as uid 65532 with a read-only root."""
    code = (
        "import json, vllm, vllm.entrypoints.openai.api_server, nixl._api;"
        "print(json.dumps({'vllm': vllm.__version__}))"
    )
    done = podman(
        "run", "--rm", "--network=none", *HARDENED, "--entrypoint=python",
        images["vllm-cpu"], "-c", code,
    )  # fmt: skip
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"vllm": "0.32.0"}


@pytest.mark.parametrize("image", ["operator", "worker-cpu"])
def test_the_images_carry_this_checkout_s_code(images: dict[str, str], image: str) -> None:
    """A layer cache never hands back old code: the package files in the image are this
    checkout's (`make images` passes a digest of the sources; some builders reuse a COPY
    whose files changed)."""
    files = ["disagg_operator/cli.py", "disagg_operator/engines/vllm/idle_shim/sitecustomize.py"]
    site = "/opt/venv/lib/python3.11/site-packages/"
    paths = [site + f for f in files]
    done = podman("run", "--rm", "--entrypoint=sha256sum", images[image], *paths)
    got = [line.split()[0] for line in done.stdout.splitlines()]
    tops = {"disagg_operator": "operator", "disagg_worker": "worker"}  # folder of each
    want = [
        hashlib.sha256((ROOT / tops[f.split("/")[0]] / f).read_bytes()).hexdigest() for f in files
    ]
    assert got == want


# Imports every module of ours installed in the image; prints the names and any failures.
IMPORT_ALL = """
import importlib, json, pathlib, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
names, failed = [], {}
for top in ("disagg_operator", "disagg_worker"):
    for path in sorted((site / top).rglob("*.py")):
        parts = path.relative_to(site).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names.append(name)
        try:
            importlib.import_module(name)
        except BaseException as e:
            failed[name] = f"{type(e).__name__}: {e}"
print(json.dumps({"names": names, "failed": failed}))
"""


@pytest.mark.parametrize(("image", "ships"), [("operator", "operator"), ("worker-cpu", "worker")])
def test_each_image_imports_every_module_it_ships(
    images: dict[str, str], image: str, ships: str
) -> None:
    """What pyproject.toml says the image ships is what it holds, and its install imports
    all of it (tests/test_ships.py checks the same outside the images)."""
    done = podman(
        "run", "--rm", "--network=none", *HARDENED, "--entrypoint=python",
        images[image], "-c", IMPORT_ALL,
    )  # fmt: skip
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["failed"] == {}
    assert sorted(found["names"]) == ship.shipped(ships)
