"""The operator asks transfer canaries for their verdicts, over real HTTP: a real canary
whose decode lost its kv_transfer_params on the way (a relay drops them) says
DecodeRecomputing, and TransferPathReady carries that reason; a real canary whose KV moved
below the floor stays ready and says SlowTransport; a Ready pod's canary whose prefill is
frozen says PrefillBusy, and the watch between syncs reports that change once."""

from __future__ import annotations

import asyncio
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disagg_operator.controller.canaries import CanaryReader
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.planning.transfer_path import Said, condition
from disagg_operator.validation import spec as validation
from disagg_tools.bench.relay import params_dropper
from disagg_tools.local.children import disagg_argv, serve_in_thread, start_child, wait_ready
from tests.operator.builders import body
from tests.worker.serve.conftest import Workers


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    group = Workers(tmp_path)
    yield group
    group.stop()


def _canary(group: Workers, prefill: str, decode: str, *extra: str) -> int:
    argv = disagg_argv("worker", "canary", "--prefill", prefill, "--decode", decode)
    argv += ["--model", "tiny", "--port", "0", "--host", "127.0.0.1", "--interval-s", "0.5"]
    argv += list(extra)
    child = start_child(f"canary-{len(group.children)}", argv, group._base, group.log_dir)
    group.children.append(child)
    return int(wait_ready(child, timeout_s=60)["http_port"])


def _pod(name: str, port_owner: str = "127.0.0.1", ready: bool = False) -> dict[str, Any]:
    """A decode pod as the API reports it: running, its canary container (not) ready."""
    return {
        "metadata": {
            "name": name,
            "labels": {"disagg.dev/role": "decode", "disagg.dev/deployment": "demo"},
        },
        "status": {
            "phase": "Running",
            "podIP": port_owner,
            "containerStatuses": [{"name": "transfer-canary", "ready": ready}],
        },
    }


def _spec(**fields: Any) -> Any:
    dd, problems = validation.parse(body(**fields))
    assert dd is not None and not problems, problems
    return dd.spec


def _probed(port: int) -> int:
    """The kubelet's readiness probe on the canary (it runs the first canary): its status."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=30) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return e.code


async def _said(port: int, pods: list[dict[str, Any]]) -> dict[str, Said]:
    reader = CanaryReader(port=port)
    await reader.start()
    try:
        return dict(await reader.verdicts(pods))
    finally:
        await reader.close()


def test_the_operator_reads_decode_recomputing_from_a_real_canary(workers: Workers) -> None:
    prefill, decode = (workers.worker(role).url for role in ("prefill", "decode"))  # type: ignore[attr-defined]
    with serve_in_thread(params_dropper(decode)) as relay:
        port = _canary(workers, prefill, relay)
        assert _probed(port) == 503  # never proven: the pod is not Ready
        said = asyncio.run(_said(port, [_pod("demo-decode-0")]))
    verdict = said["demo-decode-0"]
    assert not verdict.passing and "DecodeRecomputing" in verdict.reason, verdict
    found = condition(_spec(), [_pod("demo-decode-0")], DEFAULT, said=said)
    assert found[:2] == ("False", "DecodeRecomputing")


def test_a_slow_path_is_read_from_a_passing_canary_and_its_pod_stays_ready(
    workers: Workers,
) -> None:
    prefill, decode = (workers.worker(role).url for role in ("prefill", "decode"))  # type: ignore[attr-defined]
    port = _canary(workers, prefill, decode, "--min-bandwidth-gbps", "10000")
    assert _probed(port) == 200
    ready = [_pod("demo-decode-0", ready=True)]
    said = asyncio.run(_said(port, ready))
    verdict = said["demo-decode-0"]
    assert verdict.passing and verdict.reason.startswith("SlowTransport: the KV moved at ")
    spec = _spec(transferCanary={"minBandwidthGbytesPerSecond": 10000})
    found = condition(spec, ready, DEFAULT, said=said)
    assert found[:2] == ("False", "SlowTransport")  # and the pod is Ready all along


def test_a_healthy_canary_and_an_unreachable_one(workers: Workers) -> None:
    prefill, decode = (workers.worker(role).url for role in ("prefill", "decode"))  # type: ignore[attr-defined]
    port = _canary(workers, prefill, decode)
    assert _probed(port) == 200
    ok, gone = _pod("ok", ready=True), _pod("gone", "127.0.0.2", ready=True)
    said = asyncio.run(_said(port, [ok, gone]))
    assert "gone" not in said  # nothing answered there: no verdict, no wait past the timeout
    assert said["ok"].passing and said["ok"].reason.startswith("the last canary passed"), said
    assert condition(_spec(), [ok, gone], DEFAULT, said=said)[:2] == ("True", "CanaryPassing")
    assert condition(_spec(), [gone], DEFAULT, said={})[:2] == ("Unknown", "CanaryUnanswered")


def test_the_watch_reports_a_frozen_prefill_once_and_the_pod_stays_ready(
    workers: Workers,
) -> None:
    pre, dec = workers.worker("prefill"), workers.worker("decode")
    port = _canary(workers, pre.url, dec.url, "--timeout-s", "3")  # type: ignore[attr-defined]
    assert _probed(port) == 200
    pods = [_pod("demo-decode-0", ready=True)]
    key = ("default", "demo")

    async def watch() -> list[bool]:
        reader = CanaryReader(port=port)
        await reader.start()
        try:
            seen = [await reader.changed(key, pods, 0)]  # the first answer is news
            seen.append(await reader.changed(key, pods, 0))  # the same verdict is not
            pre.proc.send_signal(signal.SIGSTOP)
            try:
                for _ in range(200):  # each ask kicks a canary; one runs out its 3 s
                    assert _probed(port) == 200  # the pod stays Ready meanwhile
                    seen.append(await reader.changed(key, pods, 0))
                    if seen[-1]:
                        break
                    await asyncio.sleep(0.2)
            finally:
                pre.proc.send_signal(signal.SIGCONT)
            said = reader.heard(key, pods)
            assert said is not None and "PrefillBusy" in said["demo-decode-0"].reason, said
            assert condition(_spec(), pods, DEFAULT, said=said)[1] == "PrefillBusy", said
            # a pod re-created under the same name has said nothing yet
            again = [{**pods[0], "metadata": {**pods[0]["metadata"], "uid": "new"}}]
            assert reader.heard(key, again) == {} and reader.heard(("x", "y"), pods) is None
            return seen
        finally:
            await reader.close()

    seen = asyncio.run(watch())
    assert seen[:2] == [True, False] and seen[-1] is True, seen
    assert seen.count(True) == 2, seen  # the first answer, then the flip to PrefillBusy
