"""iperf3 between two pods of a podman run: the limit of the path NIXL's READ between them
takes, single- and multi-stream.

Benchmark tool (I/O: podman inspect, nsenter and iperf3 subprocesses; :func:`gbps_of` only
reads a report). iperf3 is Debian's package, run on the host inside each pod's network
namespace (``nsenter -t PID -n``, PID the pod's infra container's): the server in the
decode pod's, the client in the prefill pod's, so bytes flow prefill → decode, the way a
READ's reply does. nsenter needs root, as podman does here. Nothing but the run's own
namespaces is reached.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

from disagg_tools.local.podman.runtime import podman

PORT = 5201  # iperf3's own, inside the decode pod's namespace (no pod of ours listens on it)
STREAMS = 4  # the multi-stream figure's parallel streams (-P)


class IperfError(RuntimeError):
    """iperf3 could not measure the path; the message says why."""


def missing() -> list[str]:
    """What this host lacks to run iperf3 in a pod's namespace (empty: nothing)."""
    tools = {"iperf3": "iperf3", "nsenter": "util-linux"}  # tool → its Debian package
    lacks = [f"{t} (apt-get install -y {pkg})" for t, pkg in tools.items() if not shutil.which(t)]
    if os.geteuid() != 0:
        lacks.append("root (nsenter enters the pods' network namespaces)")
    return lacks


def netns_pid(pod: str) -> int:
    """The pid of ``pod``'s infra container: its process holds the pod's network namespace."""
    infra = podman("pod", "inspect", pod, "--format", "{{.InfraContainerID}}").stdout.strip()
    return int(podman("inspect", "--format", "{{.State.Pid}}", infra).stdout.strip())


def gbps_of(report: dict[str, Any]) -> float:
    """GB/s the receiver got, from an ``iperf3 -J`` client report (all streams summed)."""
    if report.get("error"):
        raise IperfError(f"iperf3: {report['error']}")
    return float(report["end"]["sum_received"]["bits_per_second"]) / 8e9


def measure(
    server_pid: int, client_pid: int, server_ip: str, streams: int, seconds: float
) -> float:
    """GB/s of ``streams`` TCP streams for ``seconds`` from the client's namespace to the
    server's (``server_ip``)."""
    enter = ["nsenter", "-n", "-t"]
    server = subprocess.Popen(
        [*enter, str(server_pid), "iperf3", "-s", "-1", "-p", str(PORT), "--forceflush"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert server.stdout is not None
        if "listening" not in server.stdout.readline() + server.stdout.readline():
            raise IperfError(f"iperf3 -s in pid {server_pid}'s namespace did not start")
        argv = ["iperf3", "-c", server_ip, "-p", str(PORT), "-P", str(streams), "-J"]
        done = subprocess.run(
            [*enter, str(client_pid), *argv, "-t", f"{seconds:g}"],
            capture_output=True,
            text=True,
            timeout=seconds + 30,
        )
        try:
            return gbps_of(json.loads(done.stdout))
        except (ValueError, KeyError):
            raise IperfError(f"iperf3 -c: {(done.stderr or done.stdout)[-500:]}") from None
    finally:
        server.kill()
        server.wait(10)


def limits(prefill_pod: str, decode_pod: str, decode_ip: str, seconds: float) -> dict[str, Any]:
    """The path's limits from prefill to decode: one stream and :data:`STREAMS`."""
    sender, receiver = netns_pid(prefill_pod), netns_pid(decode_pod)
    return {
        "single_gbps": round(measure(receiver, sender, decode_ip, 1, seconds), 3),
        "multi_gbps": round(measure(receiver, sender, decode_ip, STREAMS, seconds), 3),
        "streams": STREAMS,
        "seconds": seconds,
    }
