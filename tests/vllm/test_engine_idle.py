"""The engine-idle shim against the installed vLLM's own message queue (``make
test-vllm``): the class and attributes it wraps exist, and a reader waiting in the busy
window blocks on vLLM's own notification instead of spinning (measured on vLLM's
SpinCondition, by the kernel's own counts for the reader's thread, so a busy host changes
none of the verdicts: a spinning loop is runnable all the time whether or not it gets a CPU,
and a blocking one sleeps in its waits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm

SHIM = (
    Path(__file__).resolve().parents[2]
    / "operator"
    / "disagg_operator"
    / "engines"
    / "vllm"
    / "idle_shim"
)
# One vLLM SpinCondition reader and its writer over a real zmq socket; the reader waits
# for 0.5 s of its busy window (nothing is written). Per second of the window: CPU seconds,
# and the seconds its thread was runnable (on a CPU, or queued for one: what it would have
# burnt on a free core); how many waits, and how many times its thread blocked (the
# kernel's voluntary context switches: a yield is not one, a poll that sleeps is).
WAIT = """
import json, threading, time, zmq
from vllm.distributed.device_communicators import shm_broadcast as shm
from vllm.utils.network_utils import get_open_zmq_ipc_path

def sched():
    task = f"/proc/self/task/{threading.get_native_id()}"
    ran, queued, _ = open(task + "/schedstat").read().split()
    status = dict(line.split(":", 1) for line in open(task + "/status").read().splitlines())
    return (int(ran) + int(queued)) / 1e9, int(status["voluntary_ctxt_switches"])

ctx, address = zmq.Context(), get_open_zmq_ipc_path()
writer = shm.SpinCondition(is_reader=False, context=ctx, notify_address=address)
reader = shm.SpinCondition(is_reader=True, context=ctx, notify_address=address)
reader.record_read()
waits, (runnable, blocked) = 0, sched()
wall, cpu = time.monotonic(), time.process_time()
while time.monotonic() - wall < 0.5:
    reader.wait(timeout_ms=1000)
    waits += 1
cpu, wall = time.process_time() - cpu, time.monotonic() - wall
runnable, blocked = (after - before for after, before in zip(sched(), (runnable, blocked)))
print(json.dumps({"cpu": cpu / wall, "runnable": runnable / wall, "waits": waits,
                  "blocked": blocked,
                  "wrapped": getattr(shm.SpinCondition.wait, "_disagg_wrapped", False)}))
"""


# The writer notifies once inside the reader's busy window; one wait() of the reader:
# is the notification still on the reader's socket after it?
NOTIFIED = """
import json, time, zmq
from vllm.distributed.device_communicators import shm_broadcast as shm
from vllm.utils.network_utils import get_open_zmq_ipc_path
ctx, address = zmq.Context(), get_open_zmq_ipc_path()
writer = shm.SpinCondition(is_reader=False, context=ctx, notify_address=address)
reader = shm.SpinCondition(is_reader=True, context=ctx, notify_address=address)
# zmq drops what the writer sends before the reader's subscription reached it: notify
# until one arrives (the subscription is in place), then take every one that came
while not reader.local_notify_socket.poll(100):
    writer.notify()
while reader.local_notify_socket.poll(100):
    reader.local_notify_socket.recv()
reader.record_read()
writer.notify()
arrived = reader.local_notify_socket.poll(5000)  # there, not taken
reader.wait(timeout_ms=1000)
print(json.dumps({"arrived": arrived, "left": reader.local_notify_socket.poll(0)}))
"""


def _wait(env: dict[str, str], code: str = WAIT) -> dict[str, float]:
    full = {**os.environ, **env, "PYTHONPATH": str(SHIM)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_a_waiting_reader_of_vllm_s_queue_stops_spinning() -> None:
    spinning = _wait({"DISAGG_VLLM_QUEUE_POLL_US": "0"})
    idle = _wait({"DISAGG_VLLM_QUEUE_POLL_US": "100"})
    assert spinning["wrapped"] is False and idle["wrapped"] is True
    # vLLM's own loop: sched_yield for the whole window, runnable throughout, never asleep
    assert spinning["runnable"] > 0.5 and spinning["blocked"] < spinning["waits"] / 2
    # the shim's: asleep in its waits, and burning under a third of what vLLM's loop wants
    assert idle["blocked"] >= idle["waits"] / 2
    assert idle["cpu"] < spinning["runnable"] / 3


def test_a_waiting_reader_wakes_on_vllm_s_notification() -> None:
    """The shim's reader takes the writer's notification off vLLM's own socket (it blocked
    on it); vLLM's loop inside the window only yields and leaves it there."""
    vllm_loop = _wait({"DISAGG_VLLM_QUEUE_POLL_US": "0"}, NOTIFIED)
    shim = _wait({"DISAGG_VLLM_QUEUE_POLL_US": "100"}, NOTIFIED)
    assert vllm_loop["arrived"] and shim["arrived"]
    assert vllm_loop["left"] and not shim["left"]


def test_the_profile_records_the_release_the_shim_was_measured_on() -> None:
    """The vLLM this suite runs is the one the engine-idle levers were measured on: a new
    release fails here until they are measured again (docs/benchmarks.md, the levers)."""
    import vllm as installed

    from disagg_operator.engines.vllm import contract as vllm

    version = vllm.parse_version(installed.__version__)
    assert version is not None
    row = vllm.profile_for(version)
    assert row.engine_idle_checked.startswith(vllm.format_version(version) + " ")
