"""What a local run reads from a pod's status as the local kubelet writes it: a kill by a
signal reported as 128 + N (what a container runtime reports), the newest exit first
looked for in ``lastState`` (a restarted container runs again), restarts summed over the
pod's containers, the back-off message, what the pod still waits for."""

from __future__ import annotations

from typing import Any

from disagg_tools.local.rules import status


def _pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"containerStatuses": list(containers)}}


def test_a_kill_by_a_signal_reads_as_the_signal_and_an_exit_as_its_code() -> None:
    killed = {"name": "engine", "restartCount": 1, "ready": False,
              "state": {"running": {}}, "lastState": {"terminated": {"exitCode": 137}}}  # fmt: skip
    failed = {"name": "canary", "restartCount": 0, "ready": True,
              "state": {"terminated": {"exitCode": 3}}}  # fmt: skip
    assert status.exited(_pod(killed)) == ("engine", "was killed by SIGKILL")
    assert status.exited(_pod(failed)) == ("canary", "exited with code 3")
    assert status.exited(_pod({"name": "engine", "state": {"running": {}}})) is None
    assert status.restarts(_pod(killed, failed, {"name": "x"})) == 1
    assert status.waiting_for(_pod(killed, failed)) == "waiting for engine to be ready"
    assert status.waiting_for(_pod()) == "starting"


def test_the_back_off_message_is_the_kubelets() -> None:
    message = "back-off 2s restarting failed container=engine pod=p_ns(u)"
    waiting = {"name": "engine", "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                       "message": message}}}  # fmt: skip
    assert status.back_off(_pod({"name": "w", "state": {"running": {}}}, waiting)) == message
    assert status.back_off(_pod({"name": "w", "state": {"running": {}}})) == ""
    assert status.exit_text(-15) == "was killed by SIGTERM" and status.exit_status(2) == "2"
