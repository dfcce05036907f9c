"""The operator asks a failing transfer canary why, over real HTTP: a real canary whose
decode lost its kv_transfer_params on the way (a relay drops them) says
DecodeRecomputing, and TransferPathReady carries that reason. With a bandwidth floor it
asks passing canaries too: a real canary whose KV moved below the floor stays ready and
says SlowTransport."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from disagg_operator.controller.canaries import CanaryReader
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.status.transfer_path import condition
from disagg_operator.validation import spec as validation
from disagg_worker.bench.relay import params_dropper
from disagg_worker.serve.localrun import disagg_argv, serve_in_thread, start_child, wait_ready
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


async def _reasons(port: int, pods: list[dict[str, Any]], spec: Any = None) -> dict[str, str]:
    reader = CanaryReader(port=port)
    await reader.start()
    try:
        return dict(await reader.reasons(spec or _spec(), pods))
    finally:
        await reader.close()


def test_the_operator_reads_decode_recomputing_from_a_real_canary(workers: Workers) -> None:
    prefill, decode = (workers.worker(role).url for role in ("prefill", "decode"))  # type: ignore[attr-defined]
    with serve_in_thread(params_dropper(decode)) as relay:
        port = _canary(workers, prefill, relay)
        said = asyncio.run(_reasons(port, [_pod("demo-decode-0")]))
    assert "DecodeRecomputing" in said["demo-decode-0"]
    found = condition(_spec(), [_pod("demo-decode-0")], DEFAULT, canary_reasons=said)
    assert found[:2] == ("False", "DecodeRecomputing")


def test_a_slow_path_is_read_from_a_passing_canary_and_its_pod_stays_ready(
    workers: Workers,
) -> None:
    prefill, decode = (workers.worker(role).url for role in ("prefill", "decode"))  # type: ignore[attr-defined]
    port = _canary(workers, prefill, decode, "--min-bandwidth-gbps", "10000")
    ready = [_pod("demo-decode-0", ready=True)]
    # without a floor a passing canary is not asked; with one it is
    assert asyncio.run(_reasons(port, ready)) == {}
    spec = _spec(transferCanary={"minBandwidthGbytesPerSecond": 10000})
    said = asyncio.run(_reasons(port, ready, spec))
    assert said["demo-decode-0"].startswith("SlowTransport: the KV moved at "), said
    found = condition(spec, ready, DEFAULT, canary_reasons=said)
    assert found[:2] == ("False", "SlowTransport")  # and the pod is Ready all along


def test_a_healthy_canary_and_an_unreachable_one_give_no_recompute(workers: Workers) -> None:
    prefill, decode = (workers.worker(role).url for role in ("prefill", "decode"))  # type: ignore[attr-defined]
    port = _canary(workers, prefill, decode)
    said = asyncio.run(_reasons(port, [_pod("ok"), _pod("gone", "127.0.0.2")]))
    assert "gone" not in said  # nothing answered there: no reason, no wait past the timeout
    assert said["ok"].startswith("the last canary passed"), said
