"""What a local run says of its processes and pods: how a process ended, and what a pod's
status (as the local kubelet writes it) says of its containers: return codes and pod
objects in, words and numbers out.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Mapping
from typing import Any


def exit_status(returncode: int) -> str:
    """``SIGKILL`` for a process a signal ended, else its exit code."""
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return signal.Signals(-returncode).name
        return f"signal {-returncode}"
    return str(returncode)


def exit_text(returncode: int) -> str:
    """How a process ended: "was killed by SIGKILL", "exited with code 1"."""
    if returncode < 0:
        return f"was killed by {exit_status(returncode)}"
    return f"exited with code {returncode}"


def _statuses(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = (pod.get("status") or {}).get("containerStatuses") or []
    return found


def restarts(pod: Mapping[str, Any]) -> int:
    """How often the pod's containers have been restarted so far."""
    return sum(int(c.get("restartCount", 0)) for c in _statuses(pod))


def back_off(pod: Mapping[str, Any]) -> str:
    """The message of a container waiting to start again (the kubelet's CrashLoopBackOff
    message), or ""."""
    waiting = [(c.get("state") or {}).get("waiting") or {} for c in _statuses(pod)]
    return next((w["message"] for w in waiting if w.get("message")), "")


def exited(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(container, how it ended) of a container that has exited once already, if any; an
    exit code of 128 + N is a kill by signal N, as a container runtime reports it."""
    for status in _statuses(pod):
        last = (status.get("lastState") or {}).get("terminated")
        ended = last or (status.get("state") or {}).get("terminated")
        if ended:
            code = int(ended.get("exitCode", 0))
            return status["name"], exit_text(128 - code if code > 128 else code)
    return None


def waiting_for(pod: Mapping[str, Any]) -> str:
    """What the pod waits for: its containers not ready yet."""
    unready = [s["name"] for s in _statuses(pod) if not s.get("ready")]
    return f"waiting for {', '.join(unready)} to be ready" if unready else "starting"
