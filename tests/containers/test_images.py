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

modules = load("modules.py")

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


# In one container: a prefill worker, then the transfer-path self-check against it (the
# product's own `disagg worker probe`: NIXL READs over UCX between the two processes).
PROBE = """
head -c 32 /dev/urandom > /tmp/hmac
export DISAGG_HMAC_SECRET_PATH=/tmp/hmac
disagg worker serve --role prefill --http-port 0 --side-channel-port 5600 > /tmp/log 2>&1 &
for i in $(seq 120); do
  disagg worker probe --peer 127.0.0.1:5600 --json 2>/dev/null && exit 0
  sleep 1
done
cat /tmp/log >&2
exit 1
"""


def test_the_worker_image_moves_kv_blocks_over_nixl(images: dict[str, str]) -> None:
    """NIXL with UCX in the worker image: the product's probe reads blocks from a prefill
    worker in another process, as uid 65532 with a read-only root and no capabilities."""
    done = podman(
        "run", "--rm", "--network=none", *HARDENED, "--entrypoint=sh",
        images["worker-cpu"], "-c", PROBE,
    )  # fmt: skip
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ok"] is True, report


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


# Imports every module of the packages named installed in the image; prints the names,
# any failures, and whether any tools package is there.
IMPORT_ALL = """
import importlib, importlib.util, json, pathlib, sys, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
names, failed = [], {}
for top in sys.argv[1:]:
    base = site.joinpath(*top.split("."))
    paths = sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]
    for path in paths:
        if not (path.parent / "__init__.py").is_file():
            continue  # a shim a pod runs, not a module
        parts = path.relative_to(site).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names.append(name)
        try:
            importlib.import_module(name)
        except BaseException as e:
            failed[name] = f"{type(e).__name__}: {e}"
tools = importlib.util.find_spec("disagg_tools") is not None
print(json.dumps({"names": names, "failed": failed, "tools": tools}))
"""
SHARES = {
    "operator": ("disagg_operator", "disagg_contract"),
    "worker-cpu": ("disagg_worker", "disagg_contract", "disagg_operator.cli"),
}


@pytest.mark.parametrize("image", sorted(SHARES))
def test_each_image_imports_its_share_of_the_product_and_no_tool(
    images: dict[str, str], image: str
) -> None:
    """Each image installs the product's wheel with its extra: its share of the product
    imports there (tests/test_product_installs.py checks the same outside the images),
    and no module of the tools is installed."""
    done = podman(
        "run", "--rm", "--network=none", *HARDENED, "--entrypoint=python",
        images[image], "-c", IMPORT_ALL, *SHARES[image],
    )  # fmt: skip
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["failed"] == {} and found["tools"] is False
    tops = tuple({t.split(".")[0] for t in SHARES[image]})
    want = [
        m
        for m in modules.all_modules(tops=tops)
        if any(m == t or m.startswith(t + ".") for t in SHARES[image])
    ]
    assert sorted(found["names"]) == sorted(want)
