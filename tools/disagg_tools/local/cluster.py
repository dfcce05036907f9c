"""`disagg cluster`: the operator's own job on an embedded cluster on this machine.

CLI and I/O layer. Each part is the real one where one can run here: the API server
stand-in (:mod:`disagg_tools.emulator`, kube-apiserver's admission ported), the CRD and the
manifest applied with kubectl, the operator as its own process (``disagg operator``, as its
Deployment runs it), and the local kubelet running every pod the operator creates as
processes at addresses of their own (:mod:`.kubelet`). Once the deployment is Ready its
``kubectl get disagg`` row is printed, a local port forwards to its router Service (as
``kubectl port-forward svc/<name>-router`` would), a prompt is answered through it, and it
serves until Ctrl-C. How it differs from a cluster: README, "The embedded cluster".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import kmock
import yaml

from disagg_contract import commandline
from disagg_operator.api import API_VERSION, PLURAL
from disagg_operator.render import crd
from disagg_tools.emulator.server import Emulator, kubeconfig
from disagg_tools.local import forward, preflight
from disagg_tools.local.children import disagg_argv, start_child, stop_children
from disagg_tools.local.kubelet import run as kubelet_run
from disagg_tools.local.kubelet.api import Api
from disagg_tools.local.kubelet.rules import endpoints
from disagg_tools.local.up import figures

EXAMPLE = "examples/quickstart-cpu.yaml"
SLICES = ("discovery.k8s.io/v1", "endpointslices")
ROUTER_WAIT_S = 30.0  # the router resolves its Services every 5 s


class ClusterError(RuntimeError):
    """What stopped the embedded cluster, in one line naming the fix."""


def _say(message: str) -> None:
    print(message, flush=True)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="disagg cluster",
        formatter_class=commandline.HelpFormatter,
        description="Bring up an embedded cluster on this machine (an API server stand-in, "
        "the operator, a local kubelet running pods as processes), apply a manifest with "
        "kubectl, wait for Ready, answer a prompt through its router; Ctrl-C stops it all.",
    )
    commandline.add_manifest_arguments(p, "manifest to apply, e.g. " + EXAMPLE, many=False)
    p.add_argument("--port", type=int, default=8080, help="local port of the router (0: any)")
    p.add_argument("--prompt", default=None, help="send this prompt once Ready")
    p.add_argument("--max-tokens", type=int, default=16, help="tokens to generate")
    p.add_argument("--once", action="store_true", help="stop after the prompt's answer")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for Ready")
    p.add_argument(
        "--dir",
        default=None,
        help="keep the kubeconfig and every log here (default: a temp folder, removed at exit)",
    )
    return p


def main(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    (manifest,) = map(Path, commandline.manifest_paths(parser, args, many=False))
    kubectl = shutil.which("kubectl") or str(Path(sys.executable).with_name("kubectl"))
    found: list[preflight.Problem | str] = [*preflight.check_file(manifest, port=args.port)]
    if not Path(kubectl).exists():
        found.append("kubectl: not installed: `make up` installs it (scripts/install-kubectl.sh)")
    if found:
        preflight.fail(found, prog="disagg cluster")
    with contextlib.ExitStack() as stack:
        keep = args.dir is not None
        folder = (
            Path(args.dir) if keep else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        )
        folder.mkdir(parents=True, exist_ok=True)
        try:
            asyncio.run(_run(args, manifest, folder, kubectl))
        except ClusterError as e:
            print(f"disagg cluster: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            pass
    return 0


async def _run(args: argparse.Namespace, manifest: Path, folder: Path, kubectl: str) -> None:
    """Bring the parts up in a cluster's order, then the manifest, then serve."""
    stop = _stop_on_signals()
    t0 = time.monotonic()
    async with Emulator() as emulator, kmock.Server(emulator):
        url = str(emulator.url).rstrip("/")
        config = folder / "kubeconfig"
        config.write_text(yaml.safe_dump(kubeconfig(url)))
        run = Kubectl(kubectl, config)
        _say(f"API server  {url} (the stand-in; KUBECONFIG={config})")
        await run("apply", "-f", "-", stdin=crd.to_yaml())
        async with _operator(config, folder), kubelet_run.running(url, folder / "node") as node:
            _say(f"operator    running (log {folder / 'logs' / 'operator.log'})")
            _say(f"kubelet     running pods as processes at {node.net}0/24")
            for line in (await run("apply", "-f", str(manifest))).splitlines():
                _say(f"kubectl     {line}")
            namespace, name = _identity(manifest)
            await _until_ready(url, namespace, name, args.timeout, stop)
            _say(f"ready       in {time.monotonic() - t0:.0f} s\n")
            _say(await run("get", "disagg", "-n", namespace))
            await _serve(args, run, url, namespace, name, stop)


async def _serve(
    args: argparse.Namespace,
    run: Kubectl,
    url: str,
    namespace: str,
    name: str,
    stop: asyncio.Event,
) -> None:
    """Forward the local port to the router Service; answer the prompt; wait for Ctrl-C."""
    router = f"{name}-router"
    async with Api(url) as api:

        async def ready() -> list[tuple[str, int]]:
            return await _ready_endpoints(api, namespace, router)

        async with forward.serving(args.port, ready) as port:
            front = f"http://127.0.0.1:{port}"
            model = await _until_routed(front)
            _say(f"\nrouter      {front} → Service {namespace}/{router} (model {model!r})")
            if args.prompt is not None:
                await _ask(front, args.prompt, args.max_tokens)
            if args.once:
                return
            _say(
                f"\nserving until Ctrl-C. Try:\n  export KUBECONFIG={run.config}\n"
                f"  kubectl get disagg -n {namespace}\n"
                f"  kubectl describe disagg {name} -n {namespace}\n"
                f"  kubectl scale disagg {name} -n {namespace} --replicas 2\n"
                f"  curl {front}/v1/models\n"
                f"  curl {front}/v1/completions -H 'Content-Type: application/json' "
                """-d '{"prompt": "Hello", "max_tokens": 8}'"""
            )
            await stop.wait()
            _say("\nstopping: the pods' preStop hooks, the operator, the API server")


class Kubectl:
    """kubectl against the embedded cluster; a failure is a :class:`ClusterError`."""

    def __init__(self, binary: str, config: Path) -> None:
        self.binary, self.config = binary, config

    async def __call__(self, *args: str, stdin: str | None = None) -> str:
        """Run it beside the event loop (the API server answers from this loop)."""
        proc = await asyncio.create_subprocess_exec(
            self.binary, "--kubeconfig", str(self.config), *args,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate((stdin or "").encode()), 60)
        if proc.returncode:
            raise ClusterError(f"kubectl {' '.join(args)}: {err.decode().strip()}")
        return out.decode().rstrip("\n")


@contextlib.asynccontextmanager
async def _operator(config: Path, folder: Path) -> AsyncIterator[None]:
    """`disagg operator` as its own process, cluster-wide, its ports any free ones."""
    logs = folder / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    argv = disagg_argv(
        "operator", "--health-port", "0", "--metrics-port", "0", "--bind-address", "127.0.0.1",
        "--canary-seconds", "2", "--log-level", "info",
    )  # fmt: skip
    child = start_child("operator", argv, {**os.environ, "KUBECONFIG": str(config)}, logs)
    try:
        yield
    finally:
        await asyncio.to_thread(stop_children, [child], 10.0)


def _identity(manifest: Path) -> tuple[str, str]:
    """(namespace, name) of the manifest's DisaggregatedDeployment."""
    for doc in yaml.safe_load_all(manifest.read_text()):
        if isinstance(doc, dict) and doc.get("kind") == "DisaggregatedDeployment":
            meta = doc.get("metadata") or {}
            return str(meta.get("namespace") or "default"), str(meta["name"])
    raise ClusterError(f"{manifest}: no DisaggregatedDeployment")


async def _until_ready(
    url: str, namespace: str, name: str, timeout: float, stop: asyncio.Event
) -> None:
    """Wait for the Ready condition, printing each new reason; on timeout, the last one."""
    deadline, said = time.monotonic() + timeout, ""
    async with Api(url) as api:
        while not stop.is_set():
            body = await api.get(API_VERSION, PLURAL, namespace, name) or {}
            conditions = {c["type"]: c for c in (body.get("status") or {}).get("conditions", [])}
            ready = conditions.get("Ready", {})
            if ready.get("status") == "True":
                return
            now = f"{ready.get('reason', 'Pending')}: {ready.get('message', '')}".strip(": ")
            if now != said:
                _say(f"waiting     {now}")
                said = now
            if time.monotonic() > deadline:
                raise ClusterError(f"{namespace}/{name} not Ready after {timeout:.0f} s: {now}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
    raise KeyboardInterrupt


async def _ready_endpoints(api: Api, namespace: str, service: str) -> list[tuple[str, int]]:
    """The ready (address, port) pairs of ``service``'s EndpointSlices."""
    found = []
    for piece in await api.list(*SLICES, namespace):
        ports = piece.get("ports") or []
        if piece["metadata"].get("labels", {}).get(endpoints.SERVICE_NAME) == service and ports:
            found += [(a, int(ports[0]["port"])) for a in endpoints.ready_addresses(piece)]
    return found


async def _until_routed(front: str) -> str:
    """Wait until the router answers ``GET /v1/models`` (it resolves the pods behind its
    Services every 5 s, so a just-Ready deployment may not be routed yet); the model's id."""
    deadline, said = time.monotonic() + ROUTER_WAIT_S, "no answer"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        while True:
            with contextlib.suppress(aiohttp.ClientError, asyncio.TimeoutError):
                async with http.get(f"{front}/v1/models") as resp:
                    if resp.status == 200:
                        return str((await resp.json())["data"][0]["id"])
                    said = f"{resp.status} {await resp.text()}"
            if time.monotonic() > deadline:
                raise ClusterError(f"the router never answered /v1/models: {said}")
            await asyncio.sleep(0.5)


async def _ask(front: str, prompt: str, max_tokens: int) -> None:
    """One completion through the router, its figures as ``disagg up`` prints them."""
    body = {"prompt": prompt, "max_tokens": max_tokens}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http,
        http.post(f"{front}/v1/completions", json=body) as resp,
    ):
        status, out = resp.status, await resp.json()
    if status != 200:
        raise ClusterError(f"the router answered {status}: {out}")
    choice = out["choices"][0]
    _say(f"\nprompt:     {prompt!r}\ncompletion: {choice['text']!r}")
    _say("            (seeded random weights: noise by design)")
    for line in figures(out.get("disagg", {})):
        _say(line)


def _stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (the loop's handlers: no exception mid-await)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop
