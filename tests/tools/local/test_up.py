"""`disagg up`: the operator's rendered pods run as local processes behind the proxy; a
process that dies is restarted at its address while the others serve on; and every way of
stopping (done, Ctrl-C, SIGTERM, a worker failing at start) leaves no process and no port
behind."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from disagg_operator.render.objects import render
from disagg_tools.local.engines import local_engine
from disagg_tools.local.up import UpError, local_pods

REFERENCE = local_engine("reference")

ROOT = Path(__file__).resolve().parents[3]
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
UP = [sys.executable, "-m", "disagg_operator.cli", "up"]


def _rendered(path: Path = QUICKSTART) -> list[dict[str, Any]]:
    body = yaml.safe_load(path.read_text())
    body["metadata"].update(namespace="default", uid="u")
    return render(body, hmac_key="k")


AT = {"quickstart-prefill-0": "127.0.9.2", "quickstart-decode-0": "127.0.9.3"}


def test_rendered_pods_become_local_processes() -> None:
    pods = local_pods(_rendered(), REFERENCE, "/tmp/run", addresses=AT.__getitem__)
    assert [(p.role, p.name) for p in pods] == [
        ("prefill", "quickstart-prefill-0"),
        ("decode", "quickstart-decode-0"),
    ]
    for pod in pods:
        assert pod.argv[-2:] == ["worker", "serve"]
        assert pod.env["DISAGG_ENGINE_ID"] == pod.name  # fieldRef metadata.name
        assert pod.env["DISAGG_ADVERTISE_HOST"] == AT[pod.name]  # fieldRef status.podIP
        assert pod.env["DISAGG_HTTP_HOST"] == pod.env["DISAGG_SIDE_CHANNEL_HOST"] == AT[pod.name]
        assert (pod.address, pod.http_port) == (AT[pod.name], 8000)  # the rendered port
        # the handshake key: the rendered Secret's file, where the run writes its volume
        where = Path(pod.env["DISAGG_HMAC_SECRET_PATH"])
        assert where.parent.parent == Path(f"/tmp/run/pods/{pod.name}")
        (secret,) = [v for v in pod.volumes if v.name == where.parent.name]
        assert secret.files[where.name][0] == b"k"  # the key the pods were rendered with
        assert pod.env["DISAGG_ROLE"] == pod.role
        assert "UCX_TLS" not in pod.env and pod.dropped == ["UCX_TLS=tcp,self"]


def test_pods_that_run_neither_engine_are_refused() -> None:
    objects = _rendered()
    pod = next(o for o in reversed(objects) if o["kind"] == "Pod")
    pod["spec"]["containers"][0]["command"] = ["python", "serve.py"]
    with pytest.raises(UpError, match=r"runs 'python serve\.py'; disagg up runs the reference"):
        local_pods(objects, REFERENCE, "/s", addresses=AT.__getitem__)
    with pytest.raises(UpError, match="renders no prefill and decode pods"):
        pods = [o for o in objects if o["kind"] != "Pod"]
        local_pods(pods, REFERENCE, "/s", addresses=AT.__getitem__)


def _processes(manifest: Path) -> int:
    """The processes a run of ``manifest`` starts: every container of its rendered prefill
    and decode pods (engines and sidecars), and the proxy."""
    pods = [p for p in _rendered(manifest) if p["kind"] == "Pod"]
    return sum(len(p["spec"]["containers"]) for p in pods) + 1


# prefill (engine, wire peer), decode (engine, canary), the proxy
QUICKSTART_PROCESSES = 5


def _pids_and_ports(output: str) -> tuple[list[int], list[tuple[str, int]]]:
    pids = [int(p) for p in re.findall(r"\bpid (\d+)", output)]
    ports = [(h, int(p)) for h, p in re.findall(r"(127\.0\.\d+\.\d+):(\d+)", output)]
    return pids, ports


def _assert_nothing_left(output: str, expect_processes: int) -> None:
    pids, ports = _pids_and_ports(output)
    assert len(pids) == expect_processes, output
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert not alive, f"orphans: {alive}"
    for address in set(ports):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(address)  # raises if anything still listens


def test_up_with_a_prompt_runs_a_real_transfer_and_stops() -> None:
    args = [*UP, str(QUICKSTART), "--prompt", "The quick brown fox", "--max-tokens", "8"]
    done = subprocess.run([*args, "--port", "0"], capture_output=True, text=True, timeout=240)
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "dropped cluster-only UCX_TLS=tcp,self" in out
    assert re.search(r"endpoint: http://127\.0\.0\.1:\d+/v1/completions", out)
    assert re.search(r"completion: '.*'", out)
    assert re.search(
        r"transfer:   NIXL READ \d+ bytes in \d+ descriptor\(s\): [\d.]+ ms on the wire", out
    ), out
    assert f"stopped {QUICKSTART_PROCESSES} processes" in out
    assert _processes(QUICKSTART) == QUICKSTART_PROCESSES
    _assert_nothing_left(out, QUICKSTART_PROCESSES)


def test_up_routes_by_the_manifests_threshold() -> None:
    """examples/routing-threshold-cpu.yaml: a short prompt is prefilled by decode alone,
    a long one goes through a prefill and its KV moves."""
    example = str(ROOT / "examples" / "routing-threshold-cpu.yaml")
    outs = []
    for prompt in ("Hi", "The river runs to the sea. " * 4):
        args = [*UP, example, "--prompt", prompt, "--max-tokens", "4", "--port", "0"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        outs.append(done.stdout)
    assert "route:      decode alone (below_threshold: 3 prompt tokens)" in outs[0]
    assert "transfer:" not in outs[0].split("prompt:")[1]
    assert "route:      prefill, then decode (above_threshold: 109 prompt tokens)" in outs[1]
    assert "transfer:   NIXL READ" in outs[1].split("prompt:")[1]
    _assert_nothing_left(outs[1], _processes(Path(example)))


def test_up_runs_prefill_and_decode_at_different_tp_sizes() -> None:
    """examples/tp-mismatch-cpu.yaml: a TP-2 prefill (two rank processes) feeding a TP-1
    decode, which reads one KV head from each prefill rank: the same tokens as the
    quickstart's TP-1 pair for the same prompt, and nothing left behind. The same with
    examples/multinode-cpu.yaml, whose TP-2 prefill spans two pods (a LeaderWorkerSet
    group: the leader runs rank 0 and serves, the worker pod runs rank 1)."""
    prompt = ["--prompt", "The quick brown fox", "--max-tokens", "8", "--port", "0"]
    runs = {}
    spanning = ROOT / "examples" / "multinode-cpu.yaml"
    for path in (QUICKSTART, ROOT / "examples" / "tp-mismatch-cpu.yaml", spanning):
        done = subprocess.run(
            [*UP, str(path), *prompt], capture_output=True, text=True, timeout=240
        )
        assert done.returncode == 0, done.stdout + done.stderr
        runs[path.name] = done.stdout
    tokens = {name: re.search(r"tokens: +(\[.*\])", out).group(1) for name, out in runs.items()}  # type: ignore[union-attr]
    assert tokens["tp-mismatch-cpu.yaml"] == tokens["quickstart-cpu.yaml"]
    # both KV heads of the prompt's blocks, one descriptor from each prefill rank
    assert "in 2 descriptor(s)" in runs["tp-mismatch-cpu.yaml"]
    assert "in 1 descriptor(s)" not in runs["tp-mismatch-cpu.yaml"]
    _assert_nothing_left(runs["tp-mismatch-cpu.yaml"], QUICKSTART_PROCESSES)
    group = runs["multinode-cpu.yaml"]
    assert tokens["multinode-cpu.yaml"] == tokens["quickstart-cpu.yaml"]
    assert "started prefill multinode-prefill-0-0-1" in group  # the group's worker pod
    assert "ready   prefill multinode-prefill-0-0-1" not in group  # it serves nothing
    assert "in 2 descriptor(s)" in group  # a head from each rank, in its own pod
    _assert_nothing_left(group, QUICKSTART_PROCESSES + 1)  # the group's worker pod too


def _start_serving() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [*UP, str(QUICKSTART), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    seen = ""
    for line in proc.stdout:
        seen += line
        if line.startswith("endpoint:"):
            return proc, seen
    proc.wait(30)
    pytest.fail(f"disagg up never printed its endpoint:\n{seen}")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_signals_stop_every_process_and_free_every_port(sig: int, code: int) -> None:
    proc, seen = _start_serving()
    try:
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code
    assert f"stopped {QUICKSTART_PROCESSES} processes" in rest
    _assert_nothing_left(seen + rest, QUICKSTART_PROCESSES)


def test_ctrl_c_works_even_when_started_with_sigint_ignored() -> None:
    """A shell starts background jobs with SIGINT ignored, and children inherit that:
    `disagg up` sets its own Ctrl-C handler so SIGINT still stops the run."""
    proc = subprocess.Popen(
        [*UP, str(QUICKSTART), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        seen = "".join(_until_endpoint(proc.stdout))
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, seen + rest
    _assert_nothing_left(seen + rest, QUICKSTART_PROCESSES)


def _until_endpoint(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        yield line
        if line.startswith("endpoint:"):
            return


def test_killing_up_itself_still_takes_its_workers_down() -> None:
    """SIGKILL gives `disagg up` no chance to clean up: the workers' parent-death signal
    does it."""
    proc, seen = _start_serving()
    proc.kill()
    proc.communicate(timeout=30)
    pids, _ = _pids_and_ports(seen)
    deadline = time.monotonic() + 30
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
        assert time.monotonic() < deadline, f"orphans: {pids}"
        time.sleep(0.2)
    _assert_nothing_left(seen, QUICKSTART_PROCESSES)


def test_a_failing_worker_stops_the_others(tmp_path: Path) -> None:
    # A valid manifest whose decode pod gets a worker setting the worker refuses at start.
    manifest = tmp_path / "bad-worker.yaml"
    bad_env = "    env: [{name: DISAGG_NUM_BLOCKS, value: '0'}]\n"
    text = QUICKSTART.read_text()
    head, decode = text.split("  decode:\n")
    manifest.write_text(head + "  decode:\n" + bad_env + decode)
    done = subprocess.run(
        [*UP, str(manifest), "--port", "0"], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 1
    assert "DISAGG_NUM_BLOCKS: Input should be greater than 0" in done.stderr
    assert "exited with code" in done.stderr
    _assert_nothing_left(done.stdout, QUICKSTART_PROCESSES - 1)  # no proxy yet


def test_an_invalid_manifest_starts_nothing(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(QUICKSTART.read_text().replace("model: tiny", "model: huge"))
    done = subprocess.run(
        [*UP, str(manifest), "--port", "0"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "spec.model: the reference engine has no model 'huge'" in done.stderr
    assert "starting" not in done.stdout.lower()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--image", "a=b"], "--image names images for --runtime podman"),
        (
            ["--runtime", "podman", "--keep-cpu-binding"],
            "--keep-cpu-binding is for process runs",
        ),
        (["--image", "no-equals-sign"], "'no-equals-sign': write RENDERED=LOCAL"),
    ],
)
def test_options_of_the_other_runtime_are_refused_before_anything_starts(
    args: list[str], message: str
) -> None:
    done = subprocess.run(
        [*UP, str(QUICKSTART), "--port", "0", *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode in (1, 2) and message in done.stderr, done.stderr
    assert "started" not in done.stdout


def _found(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found, f"no {pattern!r} in:\n{text}"
    return found[1]


def _lines(stream: Any) -> queue.Queue[str | None]:
    """The lines of ``stream`` as they come (None at its end), read by a thread so waits
    can time out."""
    out: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            out.put(line)
        out.put(None)

    threading.Thread(target=read, daemon=True).start()
    return out


def _until(lines: queue.Queue[str | None], pattern: str, timeout_s: float, seen: list[str]) -> str:
    """Read ``lines`` (kept in ``seen``) until one matches ``pattern``; that line."""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if re.search(pattern, line):
            return line
    pytest.fail(f"no line matching {pattern!r} in {timeout_s:.0f} s:\n{''.join(seen)}")


def _rest(lines: queue.Queue[str | None], seen: list[str]) -> None:
    """Read ``lines`` to their end (the process has exited) into ``seen``."""
    while (line := lines.get(timeout=30)) is not None:
        seen.append(line)


def _complete(proxy: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"prompt": "Hello", "max_tokens": 2}).encode()
    req = urllib.request.Request(proxy + "/v1/completions", data=body)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def _serving_again(proxy: str, timeout_s: float) -> Iterator[int]:
    """Statuses of requests through the proxy, one every 0.5 s, until one succeeds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status, _ = _complete(proxy)
        yield status
        if status == 200:
            return
        time.sleep(0.5)


def test_killed_processes_are_restarted_at_their_address_while_the_rest_serves() -> None:
    """The run's kubelet restarts a killed engine in its pod (the first restart at once, as
    a kubelet's) while decode serves on and the proxy answers 502 naming the prefill; the
    pod is Ready again at its address and requests succeed. (The first one after the
    restart may still fail: decode's cached handshake with the dead process fails its
    READ, and is dropped by that failure.) A killed proxy comes back on its port."""
    proc, head = _start_serving()
    assert proc.stdout is not None
    lines, seen = _lines(proc.stdout), [head]
    try:
        proxy = _found(r"endpoint: (\S+)/v1/completions", head)
        pid = int(_found(r"started prefill \S+ \(pid (\d+)", head))
        decode = _found(r"ready   decode \S+: (http://\S+)", head)
        assert _complete(proxy)[0] == 200
        os.kill(pid, signal.SIGKILL)
        # the first restart comes at once (a kubelet's), but a worker needs seconds to serve
        status, answer = _complete(proxy)
        assert status == 502, answer
        assert "prefill" in answer["error"]["message"], answer
        with urllib.request.urlopen(decode + "/health", timeout=5) as resp:
            assert resp.status == 200  # the others serve on
        restart = _until(lines, r"^restart ", 10, seen)
        assert restart.split() == [
            "restart", "quickstart-prefill-0:", "engine", "was", "killed", "by", "SIGKILL",
            "(restart", "1)",
        ], restart  # fmt: skip
        _until(lines, r"^ready     quickstart-prefill-0 \(pid \d+", 30, seen)
        statuses = list(_serving_again(proxy, 20))
        assert statuses[-1] == 200, statuses
        # the proxy too comes back at its address
        os.kill(int(_found(r"ready   proxy \(pid (\d+)\)", head)), signal.SIGKILL)
        _until(lines, r"^restart   proxy: proxy was killed by SIGKILL \(restart 1\)", 10, seen)
        _until(lines, r"^ready     proxy \(pid \d+\)", 30, seen)
        assert _complete(proxy)[0] == 200
        assert proc.poll() is None, "".join(seen)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(60)
        finally:
            proc.kill()  # no-op once it has exited; never leave a run behind
    _rest(lines, seen)
    assert proc.returncode == 130
    assert f"stopped {QUICKSTART_PROCESSES} processes" in seen[-1], "".join(seen)
    # the first processes and the two restarted ones (the sidecars of the prefill's pod
    # said again with its engine)
    _assert_nothing_left("".join(seen), QUICKSTART_PROCESSES + 3)


def test_up_runs_its_proxy_with_the_manifests_routing_policy() -> None:
    from disagg_tools.local.stack import router_settings
    from disagg_worker.serve.proxy import app as proxy_app
    from disagg_worker.serve.proxy.config import from_args

    manifest = yaml.safe_load(QUICKSTART.read_text())
    manifest["spec"]["routing"] = {"disaggregate": "threshold", "thresholdTokens": 100}
    flags, _ = router_settings(manifest)
    policy = from_args(
        proxy_app._parser().parse_args(["--prefill", "p", "--decode", "d", *flags])
    ).routing
    assert (policy.mode, policy.threshold_tokens, policy.prefix_cache) == ("threshold", 100, False)
    assert router_settings(yaml.safe_load(QUICKSTART.read_text())) == (
        ["--disaggregate", "always"], {})  # fmt: skip


def test_up_runs_its_proxy_with_the_router_deployments_tracing_flags_and_sampler() -> None:
    """`disagg up` of a manifest with spec.tracing: its proxy gets what the router
    Deployment would (the endpoint flag, the sampler variables), read from the render."""
    from disagg_operator.render.objects import render
    from disagg_tools.local.stack import router_settings

    manifest = yaml.safe_load((ROOT / "examples" / "tracing-cpu.yaml").read_text())
    (deploy,) = [
        o for o in render(manifest, hmac_key="k") if o["kind"] == "Deployment"
    ]  # the router's
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    args, env = container["args"], {e["name"]: e.get("value") for e in container.get("env", [])}
    flags, sampler = router_settings(manifest)
    endpoint = flags[flags.index("--otlp-traces-endpoint") + 1]
    assert endpoint == args[args.index("--otlp-traces-endpoint") + 1]
    assert sampler and all(env[k] == v for k, v in sampler.items())
