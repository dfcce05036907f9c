"""The local kubelet: the real operator over the API emulator, and every pod it creates
run as processes here, at an address of its own, probed as a kubelet probes them, its
Services answering with Ready pods only (EndpointSlices, and the name table standing for
cluster DNS)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.run import running as operator_running
from disagg_tools.local.kubelet import run as kubelet_run
from disagg_tools.local.kubelet.node import Kubelet
from disagg_tools.local.kubelet.rules.endpoints import parse_hosts
from tests.operator.conftest import DD, DD_PATH, NS, api, condition, pods, quickstart, until
from tests.support.emulator import Emulator

SLICES = "discovery.k8s.io/v1/endpointslices"
KV = "disagg.dev/kv-revision"


@pytest.fixture()
async def cluster(emulator: Emulator, tmp_path: Path) -> AsyncIterator[Kubelet]:
    """The operator (its canary watch every second) and the local kubelet."""
    url = str(emulator.url).rstrip("/")
    async with (
        operator_running(OperatorConfig(host=url, canary_seconds=1.0)),
        kubelet_run.running(url, tmp_path) as kubelet,
    ):
        yield kubelet


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


async def test_the_operators_pods_run_here_turn_ready_by_their_probes_and_stop_by_their_prestop(
    emulator: Emulator, cluster: Kubelet
) -> None:
    await api(emulator, "POST", DD_PATH, quickstart("demo"))
    await until("deployment Ready", lambda: condition(emulator, "demo").get("status") == "True", 90)
    running = pods(emulator)
    assert sorted(running) == ["demo-decode-0", "demo-prefill-0"]
    addresses = {n: p["status"]["podIP"] for n, p in running.items()}
    assert len(set(addresses.values())) == 2 and all(
        a.startswith(cluster.net) for a in addresses.values()
    )
    # each pod serves on its rendered port at its own address, as in a cluster
    health = _get(f"http://{addresses['demo-prefill-0']}:8000/health")
    assert health["status"] == "ok"
    # the decode pod turned Ready because its canary passed through the prefill Service
    decode = running["demo-decode-0"]
    assert {c["name"]: c["ready"] for c in decode["status"]["containerStatuses"]} == {
        "engine": True,
        "transfer-canary": True,
    }
    verdict = _get(f"http://{addresses['demo-decode-0']}:8090/verdict")
    assert verdict["ready"] is True, verdict
    path = condition(emulator, "demo", "TransferPathReady")
    assert path["status"] == "True", path
    # the endpoints controller's slices and the name table agree with the pods' readiness
    slices = {s["metadata"]["name"]: s for s in emulator.objects_of(SLICES, NS)}
    prefill = slices["demo-prefill-local"]["endpoints"]
    assert [(e["addresses"], e["conditions"]["ready"]) for e in prefill] == [
        ([addresses["demo-prefill-0"]], True)
    ]

    def table() -> dict[str, list[str]]:  # the controllers write it on their next tick
        return _hosts(cluster)

    long = f"demo-decode.{NS}.svc.cluster.local"
    await until("the name table", lambda: table().get(long) == [addresses["demo-decode-0"]], 10)
    assert table()["demo-prefill"] == [addresses["demo-prefill-0"]]

    # a deleted pod leaves its endpoints, then stops through its preStop
    old = pods(emulator)["demo-prefill-0"]
    address = old["status"]["podIP"]
    await api(emulator, "DELETE", f"/api/v1/namespaces/{NS}/pods/demo-prefill-0")

    # terminating: still there (the finalizer holds it), its endpoint out of the Service
    # (ready false, terminating true) while ``serving`` still says its readiness probe (a
    # kubelet keeps probing readiness during the grace), out of the name table
    def terminating() -> bool:
        pod = pods(emulator).get("demo-prefill-0")
        if not (pod and pod["metadata"].get("deletionTimestamp")):
            return False
        found = {s["metadata"]["name"]: s for s in emulator.objects_of(SLICES, NS)}
        mine = [
            e["conditions"]
            for e in found["demo-prefill-local"]["endpoints"]
            if e["targetRef"]["name"] == "demo-prefill-0"
        ]
        return bool(mine) and mine[0]["terminating"] and not mine[0]["ready"]

    await until("the pod terminating, its endpoint not ready", terminating, 30)
    await until(
        "gone from the name table",
        lambda: _hosts(cluster).get("demo-prefill") != [address],
        10,
    )

    # the operator starts another in its place (the next free index: the old one still
    # holds its own while it terminates), and the old one goes once its preStop ran
    def replaced() -> bool:
        now = [p for n, p in pods(emulator).items() if n.startswith("demo-prefill-")]
        return [p["metadata"]["uid"] != old["metadata"]["uid"] and _ready(p) for p in now] == [True]

    await until("another prefill pod Ready, the old one gone", replaced, 90)
    assert not cluster.address_of("demo-prefill-0", NS)  # its processes stopped
    pod = f"{NS}-demo-prefill-0-*"
    (log,) = (cluster.workdir / "pods").glob(f"{pod}/logs/demo-prefill-0-engine.log")
    assert "disagg worker drain: drained" in log.read_text()  # its preStop ran first
    assert _hosts(cluster)["demo-prefill"] != [address]


def _pid(kubelet: Kubelet, pod: str, container: str) -> int:
    running = next(p for p in kubelet.pods.values() if p.run.name == pod)
    return running.boxes[container].child.proc.pid


def _prompt(n: int) -> list[int]:
    return [1] + [(i * 37 + 11) % 256 for i in range(n - 1)]


async def _flood(url: str, stop: asyncio.Event, answers: list[int]) -> None:
    """One client sending long prompts to a prefill pod as the router's prefill hop does,
    one after another until ``stop``."""
    params = {"do_remote_decode": True, "do_remote_prefill": False}
    body = {"prompt": _prompt(2000), "max_tokens": 1, "kv_transfer_params": params}
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        while not stop.is_set():
            try:
                async with http.post(url + "/v1/completions", json=body) as resp:
                    answers.append(resp.status)
            except (aiohttp.ClientError, asyncio.TimeoutError):
                answers.append(0)


async def test_a_flooded_then_killed_prefill_never_takes_a_decode_pod_out(
    emulator: Emulator, cluster: Kubelet
) -> None:
    """Issue 34's scene on the local kubelet: every decode pod stays Ready (by the probes
    a kubelet runs, as the Services see it) while the prefill is flooded past the canary's
    budget and then killed; TransferPathReady says so within 60 s and recovers."""
    body = quickstart("demo", kvTransfer={"transferDeadlineSeconds": 1})  # canary budget 6 s
    body["spec"]["decode"]["replicas"] = 2
    await api(emulator, "POST", DD_PATH, body)
    path = lambda: condition(emulator, "demo", "TransferPathReady")  # noqa: E731
    await until(
        "deployment Ready", lambda: condition(emulator, "demo").get("status") == "True", 120
    )
    await until("path proven", lambda: path().get("status") == "True", 60)
    decodes = sorted(n for n in pods(emulator) if "-decode-" in n)
    unready: list[str] = []
    done = asyncio.Event()

    async def watch() -> None:  # what the endpoints see, five times a second
        while not done.is_set():
            unready.extend(n for n in decodes if not _ready(pods(emulator)[n]))
            await asyncio.sleep(0.2)

    watcher = asyncio.ensure_future(watch())
    prefill = f"http://{pods(emulator)['demo-prefill-0']['status']['podIP']}:8000"
    answers: list[int] = []
    flooding = asyncio.Event()
    clients = [asyncio.ensure_future(_flood(prefill, flooding, answers)) for _ in range(12)]
    loop = asyncio.get_running_loop()
    started = loop.time()
    busy = await until(
        "TransferPathReady False while prefill is flooded",
        lambda: (c := path()).get("status") == "False" and c,
        60,
    )
    said = loop.time() - started
    flooding.set()
    for client in clients:  # what they queued dies with the prefill below
        client.cancel()
    await asyncio.gather(*clients, return_exceptions=True)
    os.kill(_pid(cluster, "demo-prefill-0", "engine"), signal.SIGKILL)
    gone = await until(
        "the killed prefill said",
        lambda: (c := path()).get("reason") in ("PrefillUnreachable", "PrefillBusy") and c,
        60,
    )
    await until("path proven again", lambda: path().get("status") == "True", 90)
    done.set()
    await watcher
    assert busy["reason"] in ("PrefillBusy", "PrefillUnreachable"), busy
    assert said <= 60 and answers, (said, answers[:5])
    assert gone["status"] == "False"
    assert unready == []  # no decode pod ever left its Service
    assert condition(emulator, "demo").get("status") == "True"


async def test_an_engine_restart_gates_its_pod_until_a_canary_passes_on_the_new_engine(
    emulator: Emulator, cluster: Kubelet
) -> None:
    """The decode engine container's readiness is the canary's latched /ready: killed, the
    kubelet restarts it unready, and it turns Ready only once a canary passed on the new
    engine instance. The prefill is frozen meanwhile, so no canary can pass: the new
    engine answers its /health, and still the pod stays out until the prefill is back."""
    await api(
        emulator, "POST", DD_PATH, quickstart("demo", kvTransfer={"transferDeadlineSeconds": 1})
    )
    await until("deployment Ready", lambda: condition(emulator, "demo").get("status") == "True", 90)
    address = pods(emulator)["demo-decode-0"]["status"]["podIP"]
    before = _get(f"http://{address}:8090/ready")["reason"]
    prefill = _pid(cluster, "demo-prefill-0", "engine")
    os.kill(prefill, signal.SIGSTOP)
    try:
        os.kill(_pid(cluster, "demo-decode-0", "engine"), signal.SIGKILL)
        await until("the pod unready", lambda: not _ready(pods(emulator)["demo-decode-0"]), 30)

        def answers() -> bool:
            try:
                return bool(_get(f"http://{address}:8000/health")["status"] == "ok")
            except OSError:
                return False

        await until("the new engine answers", answers, 60)
        for _ in range(2 * 6 * 5):  # two of its probe periods (6 s): still out
            assert not _ready(pods(emulator)["demo-decode-0"])
            await asyncio.sleep(0.2)
    finally:
        os.kill(prefill, signal.SIGCONT)
    await until("the pod Ready again", lambda: _ready(pods(emulator)["demo-decode-0"]), 90)
    statuses = pods(emulator)["demo-decode-0"]["status"]["containerStatuses"]
    assert {s["name"]: s["restartCount"] for s in statuses} == {"engine": 1, "transfer-canary": 0}
    after = _get(f"http://{address}:8090/ready")
    assert after["ready"] is True and after["reason"].startswith("a canary passed on this engine")
    assert after["reason"] != before  # proven on the new engine instance, not latched on the old


async def test_a_kv_roll_behind_the_router_serves_every_request_from_both_revisions(
    emulator: Emulator, cluster: Kubelet
) -> None:
    """A change of the KV key with the router on, maxSurge 1: clients keep sending through
    the router's Service while the new revision rolls in; every request is answered, both
    revisions answer some, no role ever has more than one pod beyond its replicas, and the
    router ends told the new revision alone."""
    one = {"maxSurge": 1, "maxUnavailable": 0}
    # a 3 s transfer deadline: 1 s was a window a busy 2-core host missed (a decode's READ
    # answered 504 while 8 pods, the operator and the clients shared it); the default (10 s)
    # would slow every canary probe, and so the roll, by half
    body = quickstart(
        "demo", router={"enabled": True, "replicas": 1}, kvTransfer={"transferDeadlineSeconds": 3}
    )
    for role_name in ("prefill", "decode"):
        body["spec"][role_name].update(replicas=2, rollout=one)
    await api(emulator, "POST", DD_PATH, body)
    await until(
        "deployment Ready", lambda: condition(emulator, "demo").get("status") == "True", 120
    )
    first = (emulator.find(DD, NS, "demo") or {})["status"]["kvRevision"]
    kv_of = {p["status"]["podIP"]: p["metadata"]["labels"][KV] for p in pods(emulator).values()}
    router = f"demo-router.{NS}.svc"

    def router_sees_both() -> bool:  # it resolves its Services every 5 s
        found = _hosts(cluster).get(router) or []
        if not found:
            return False
        health = _get(f"http://{found[0]}:8080/health")
        return len(health["prefill"]) == 2 and len(health["decode"]) == 2

    await until("the router reaching every pod", router_sees_both, 60)
    answered: list[tuple[int, str]] = []
    failed: list[str] = []  # what each request not answered 200 got
    peak = {"prefill": 0, "decode": 0}
    stop = asyncio.Event()

    async def client() -> None:  # as a client behind the router's Service would
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            while not stop.is_set():
                found = _hosts(cluster).get(router) or []
                if not found:
                    await asyncio.sleep(0.05)
                    continue
                url = f"http://{found[0]}:8080/v1/completions"
                try:
                    async with http.post(
                        url, json={"prompt": "The quick", "max_tokens": 4}
                    ) as resp:
                        out = await resp.json()
                        if resp.status != 200:
                            failed.append(f"{resp.status} {out.get('error', out)}")
                        answered.append(
                            (
                                resp.status,
                                out.get("disagg", {}).get("proxy", {}).get("decode_url", ""),
                            )
                        )
                except aiohttp.ClientConnectionError:  # a router pod that just went: next one
                    continue

    async def watch() -> None:
        while not stop.is_set():
            for p in pods(emulator).values():
                kv_of.setdefault(p.get("status", {}).get("podIP", ""), p["metadata"]["labels"][KV])
            for role_name in peak:
                have = sum(1 for n in pods(emulator) if f"-{role_name}-" in n)
                peak[role_name] = max(peak[role_name], have)
            await asyncio.sleep(0.1)

    tasks = [asyncio.ensure_future(client()) for _ in range(2)] + [asyncio.ensure_future(watch())]
    engine = {"type": "reference", "image": "ghcr.io/disagg-dev/disagg-worker-cpu:0.2.0"}
    await api(emulator, "PATCH", f"{DD_PATH}/demo", {"spec": {"engine": engine}})

    def rolled() -> bool:
        status = (emulator.find(DD, NS, "demo") or {}).get("status") or {}
        progressing = condition(emulator, "demo", "Progressing")
        return status.get("kvRevision") != first and progressing.get("reason") == "RolloutComplete"

    await until("the KV roll complete", rolled, 240)
    stop.set()
    await asyncio.gather(*tasks)
    new = (emulator.find(DD, NS, "demo") or {})["status"]["kvRevision"]
    assert answered and failed == []  # every request answered
    served = {kv_of.get(url.split("//")[1].split(":")[0]) for _, url in answered}
    assert served == {first, new}  # both revisions served during the move
    assert peak == {"prefill": 3, "decode": 3}  # replicas + maxSurge, never more
    deploy = emulator.find("apps/v1/deployments", NS, "demo-router") or {}
    args = deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [b for a, b in itertools.pairwise(args) if a == "--kv-revision"] == [new]


def _hosts(cluster: Any) -> dict[str, list[str]]:
    """The kubelet's name table ({} before it is written)."""
    path = cluster.hosts_file(NS)
    return parse_hosts(path.read_text()) if path.is_file() else {}
