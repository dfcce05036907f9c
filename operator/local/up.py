"""`disagg up FILE`: run a DisaggregatedDeployment on this machine, no cluster needed.

CLI layer. The manifest goes through the operator's own :func:`render` — the very pods a
cluster would get — and each reference-engine pod's container command runs as a local
process with that pod's env, adapted for one host (:func:`local_pods`): field refs become
the pod name and 127.0.0.1, listen hosts 127.0.0.1, ports 0 (each worker announces the port
it bound), the handshake Secret a private temp file, and cluster-only ``UCX_TLS`` is
dropped so UCX picks local transports (shared memory / CMA). Then a P/D proxy starts in
front. Ctrl-C, SIGTERM, a dying worker or any error stops every process group.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml

from disagg_worker.serve.localrun import (
    Child,
    ChildError,
    disagg_argv,
    start_child,
    stop_children,
    wait_ready,
)

ROLE_LABEL = "disagg.dev/role"
LOCAL = "127.0.0.1"
CLUSTER_ONLY = ("UCX_TLS", "DISAGG_UCX_TLS")
FIELD_REFS = {"metadata.name": None, "status.podIP": LOCAL, "status.hostIP": LOCAL}
LOCAL_ENV = {
    "DISAGG_HTTP_HOST": LOCAL,
    "DISAGG_SIDE_CHANNEL_HOST": LOCAL,
    "DISAGG_ADVERTISE_HOST": LOCAL,
    "DISAGG_HTTP_PORT": "0",
    "DISAGG_SIDE_CHANNEL_PORT": "0",
}


class UpError(RuntimeError):
    """Something stops the local run; the message says what and what to do."""


@dataclass(frozen=True)
class LocalPod:
    """A rendered pod as a local process: its argv and env, and what was left out."""

    name: str
    role: str
    argv: list[str]
    env: dict[str, str]
    dropped: list[str]


def local_pods(objects: list[dict[str, Any]], secret_path: str) -> list[LocalPod]:
    """Rendered objects → one local process per prefill/decode pod (pure)."""
    out = []
    for pod in objects:
        role = pod.get("metadata", {}).get("labels", {}).get(ROLE_LABEL)
        if pod.get("kind") != "Pod" or role not in ("prefill", "decode"):
            continue
        out.append(_local_pod(pod, role, secret_path))
    if not {p.role for p in out} >= {"prefill", "decode"}:
        raise UpError("the manifest renders no prefill and decode pods to run")
    return out


def _local_pod(pod: dict[str, Any], role: str, secret_path: str) -> LocalPod:
    name = pod["metadata"]["name"]
    container = next(
        (c for c in pod["spec"]["containers"] if c["name"] == "engine"),
        pod["spec"]["containers"][0],
    )
    command = [*container.get("command", []), *container.get("args", [])]
    if command[:3] != ["disagg", "worker", "serve"]:
        raise UpError(
            f"pod {name}: runs {' '.join(command[:3]) or 'its image entrypoint'!r}, not the "
            "reference engine; disagg up runs spec.engine.type: reference only (use "
            "kubectl apply for vLLM)"
        )
    env: dict[str, str] = {}
    dropped = []
    for item in container.get("env", []):
        key = item["name"]
        if key in CLUSTER_ONLY:
            dropped.append(f"{key}={item.get('value', '')}")
        elif "value" in item:
            env[key] = str(item["value"])
        else:
            path = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            if path not in FIELD_REFS:
                raise UpError(
                    f"pod {name}: env {key} comes from {item['valueFrom']}; "
                    "disagg up resolves only metadata.name and status.podIP"
                )
            env[key] = FIELD_REFS[path] or name
    env.update(LOCAL_ENV)
    env["DISAGG_HMAC_SECRET_PATH"] = secret_path
    return LocalPod(name, role, disagg_argv(*command[1:]), env, dropped)


def _load(path: str) -> dict[str, Any]:
    try:
        docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    except (OSError, yaml.YAMLError) as e:
        raise UpError(f"{path}: {e}") from None
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DisaggregatedDeployment"]
    if len(found) != 1:
        raise UpError(f"{path}: expected one DisaggregatedDeployment, found {len(found)}")
    body = dict(found[0])
    body["metadata"] = {"namespace": "default", "uid": "local", **body.get("metadata", {})}
    return body


def _render(body: dict[str, Any], hmac_key: str) -> list[dict[str, Any]]:
    from disagg_operator.render.objects import render
    from disagg_operator.validation import InvalidSpec

    try:
        return render(body, hmac_key=hmac_key)
    except InvalidSpec as e:
        raise UpError("invalid manifest:\n  " + "\n  ".join(map(str, e.problems))) from None


def _say(message: str) -> None:
    print(message, flush=True)


def _get_json(url: str, body: dict[str, Any] | None = None, timeout: float = 5.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        detail = json.load(e).get("error", {}).get("message", e.reason)
        raise UpError(f"{url} answered {e.code}: {detail}") from None


class _Stop(Exception):
    """SIGTERM arrived: unwind through the cleanup like Ctrl-C does."""


def _on_sigterm(signum: int, frame: Any) -> NoReturn:
    raise _Stop


@dataclass
class Run:
    """The processes of one local run and their endpoints."""

    children: list[Child]
    workers: dict[str, list[str]]
    proxy_url: str = ""


def _start_workers(pods: list[LocalPod], log_dir: Path, run: Run) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DISAGG_", "UCX_TLS"))}
    for pod in pods:
        child = start_child(pod.name, pod.argv, {**base, **pod.env}, log_dir)
        run.children.append(child)
        _say(f"  started {pod.role} {pod.name} (pid {child.proc.pid})")
    for pod, child in zip(pods, run.children, strict=True):
        info = wait_ready(child, timeout_s=120)
        url = f"http://{LOCAL}:{info['http_port']}"
        run.workers.setdefault(pod.role, []).append(url)
        side = info.get("side_channel_port")
        _say(
            f"  ready   {pod.role} {pod.name}: {url}"
            + (f", side channel {LOCAL}:{side}" if side else "")
        )
    for url in (u for urls in run.workers.values() for u in urls):
        health = _get_json(url + "/health")
        if health.get("status") != "ok":
            raise UpError(f"{url}/health: {health}")


def _start_proxy(port: int, log_dir: Path, run: Run) -> None:
    argv = disagg_argv("proxy", "--port", str(port), "--prefill", *run.workers["prefill"])
    argv += ["--decode", *run.workers["decode"]]
    child = start_child("proxy", argv, dict(os.environ), log_dir)
    run.children.append(child)
    info = wait_ready(child, timeout_s=60)
    run.proxy_url = f"http://{LOCAL}:{info['http_port']}"
    _say(f"  ready   proxy (pid {child.proc.pid}): {run.proxy_url}")


def _ask(run: Run, prompt: str, max_tokens: int) -> None:
    url = run.proxy_url + "/v1/completions"
    warm = _get_json(url, {"prompt": "", "max_tokens": 1}, timeout=120).get("disagg", {})
    _say(
        f"\nwarm-up request: first handshake and NIXL connection took "
        f"{warm.get('transfer_ms', 0):.1f} ms (paid once per prefill/decode pair)"
    )
    out = _get_json(url, {"prompt": prompt, "max_tokens": max_tokens}, timeout=120)
    _say(f"\nprompt:     {prompt!r}\ncompletion: {out['choices'][0]['text']!r}")
    _say(f"tokens:     {out['choices'][0].get('token_ids')}")
    _say("            (seeded random weights: noise by design, the same as one process gives)")
    for line in _figures(out.get("disagg", {})):
        _say(line)


def _figures(d: dict[str, Any]) -> Iterator[str]:
    proxy, pre = d.get("proxy", {}), d.get("prefill", {})
    compute = pre.get("prompt_ms", 0) + pre.get("first_step_ms", 0)
    yield f"prefill:    {pre.get('engine_id')} computed the prompt in {compute:.1f} ms"
    if "transfer_ms" in d:
        nbytes, wire = d.get("transfer_bytes", 0), d.get("transfer_wire_ms", 0)
        rate = f" ({nbytes / wire / 1e3:.0f} MB/s)" if wire else ""
        yield (
            f"transfer:   NIXL READ {int(nbytes)} bytes in {int(d.get('transfer_descriptors', 0))}"
            f" descriptor(s): {wire:.3f} ms on the wire{rate}, {d['transfer_ms']:.2f} ms in all"
        )
        if d.get("transfer_handshake_ms"):
            yield (
                "            incl. the first handshake with this prefill: "
                f"{d['transfer_handshake_ms']:.1f} ms"
            )
    yield (
        f"decode:     {d.get('engine_id')}: first step {d.get('first_step_ms', 0):.1f} ms, "
        f"then {d.get('decode_ms', 0):.1f} ms"
    )
    yield (
        f"proxy hops: prefill {proxy.get('prefill_hop_ms', 0):.1f} ms, decode "
        f"{proxy.get('decode_hop_ms', 0):.1f} ms, total {proxy.get('total_ms', 0):.1f} ms"
    )


def _watch(run: Run) -> None:
    """Until a signal: stop if any process dies."""
    while True:
        for child in run.children:
            if child.proc.poll() is not None:
                raise ChildError(
                    f"{child.name} exited with code {child.proc.returncode}:\n{child.log_tail()}"
                )
        time.sleep(0.5)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="disagg up",
        description="Run a DisaggregatedDeployment (reference engine) on this machine: the "
        "operator's rendered pods as local processes with real NIXL transfers, behind a "
        "P/D proxy. Ctrl-C stops everything.",
    )
    p.add_argument("file", help="manifest with one DisaggregatedDeployment")
    p.add_argument("--prompt", help="send one request, print the result, then stop")
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--port", type=int, default=8080, help="proxy port (0: any free port)")
    return p


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    run = Run([], {})
    try:
        with tempfile.TemporaryDirectory(prefix="disagg-up-") as tmp:
            try:
                return _run(args, Path(tmp), run)
            finally:
                stop_children(run.children)
                if run.children:
                    _say(f"stopped {len(run.children)} processes")
    except (UpError, ChildError, OSError) as e:
        print(f"disagg up: {e}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, _Stop):
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace, tmp: Path, run: Run) -> int:
    key = secrets.token_hex(32)
    secret = tmp / "hmac"
    secret.write_text(key)
    secret.chmod(0o600)
    pods = local_pods(_render(_load(args.file), key), str(secret))
    _say(f"rendered {len(pods)} pods from {args.file}; starting them as local processes")
    dropped = sorted({d for p in pods for d in p.dropped})
    if dropped:
        _say(
            f"  dropped cluster-only {', '.join(dropped)}: "
            "UCX picks local transports (shared memory, CMA)"
        )
    _start_workers(pods, tmp, run)
    _start_proxy(args.port, tmp, run)
    _say(f"\nendpoint: {run.proxy_url}/v1/completions")
    if args.prompt is not None:
        _ask(run, args.prompt, args.max_tokens)
        return 0
    _say(
        f'try: curl -s {run.proxy_url}/v1/completions -d \'{{"prompt": "Hello", '
        '"max_tokens": 16}\'\nCtrl-C stops everything'
    )
    _watch(run)
    return 0
