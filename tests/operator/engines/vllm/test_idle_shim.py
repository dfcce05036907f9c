"""The NIXL idle shim (disagg_operator/engines/vllm/idle_shim/sitecustomize.py) in a fresh
interpreter, as an engine gets it: first on PYTHONPATH, NIXL imported later by the
engine's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = (
    Path(__file__).resolve().parents[4]
    / "operator"
    / "disagg_operator"
    / "engines"
    / "vllm"
    / "idle_shim"
)
# what vLLM's NixlConnector does: an agent with the UCX backend and NIXL's defaults
AGENT = """
import json, sys
import nixl_cu12._api as api
api.nixl_agent("engine", api.nixl_agent_config(backends=["UCX"]))
shim = sys.modules.get("sitecustomize")
print(json.dumps({"applied": getattr(shim, "applied", None), "image": "image_ran" in sys.modules}))
"""


def _run(code: str, env: dict[str, str], path: list[Path]) -> dict[str, object]:
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(map(str, path))}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture
def image_site(tmp_path: Path) -> Path:
    """An image's own sitecustomize, later on the path: it must still run."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['image_ran'] = sys\n")
    return tmp_path


def test_the_agent_an_engine_creates_gets_the_delay(image_site: Path) -> None:
    got = _run(AGENT, {}, [SHIM, image_site])
    assert got == {"applied": [5000], "image": True}
    got = _run(AGENT, {"DISAGG_NIXL_PROGRESS_DELAY_US": "250"}, [SHIM])
    assert got["applied"] == [250]


def test_a_delay_of_zero_leaves_nixl_alone() -> None:
    got = _run(AGENT, {"DISAGG_NIXL_PROGRESS_DELAY_US": "0"}, [SHIM])
    assert got["applied"] == []


def test_bindings_imported_before_the_hook_are_patched_too() -> None:
    """install() patches bindings already in sys.modules (the shim loaded late)."""
    code = f"""
import json, sys
import nixl_cu12._api as api
sys.path.insert(0, {str(SHIM)!r})
import sitecustomize as shim
shim.install(500)
api.nixl_agent("engine", api.nixl_agent_config(backends=["UCX"]))
print(json.dumps({{"applied": shim.applied}}))
"""
    got = _run(code, {"DISAGG_NIXL_PROGRESS_DELAY_US": "0"}, [])
    assert got["applied"] == [500]


def test_the_shim_loaded_twice_patches_once_and_never_recurses() -> None:
    """A second copy of the module (another name, e.g. an image that loads it again):
    one finder, one patch."""
    code = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("again", {str(SHIM / "sitecustomize.py")!r})
again = importlib.util.module_from_spec(spec)
spec.loader.exec_module(again)
import nixl_cu12._api as api
api.nixl_agent("engine", api.nixl_agent_config(backends=["UCX"]))
first = sys.modules["sitecustomize"]
finders = sum(1 for f in sys.meta_path if getattr(f, "disagg_engine_idle", False))
print(json.dumps({{"applied": first.applied + again.applied, "finders": finders}}))
"""
    got = _run(code, {}, [SHIM])
    assert got == {"applied": [5000], "finders": 1}


def test_the_shim_is_what_the_operator_ships() -> None:
    from disagg_operator.engines.vllm import engine_idle

    assert (SHIM / "sitecustomize.py").read_text() == engine_idle.SOURCE


# A stand-in for vLLM's SpinCondition with the attributes the shim reads (the vLLM suite,
# tests/vllm/test_engine_idle.py, runs vLLM's own class): wait() records that it ran.
STAND_IN = """
import sys, time, types
for name in ("vllm", "vllm.distributed", "vllm.distributed.device_communicators"):
    sys.modules[name] = types.ModuleType(name)
    sys.modules[name].__path__ = []
class SpinCondition:
    def __init__(self, is_reader, busy_loop_s=1):
        self.is_reader, self.busy_loop_s, self.last_read = is_reader, busy_loop_s, time.monotonic()
        self.original = 0
    def wait(self, timeout_ms=None):
        self.original += 1
module = types.ModuleType("vllm.distributed.device_communicators.shm_broadcast")
module.SpinCondition = SpinCondition
"""


def _queue(setup: str, env: dict[str, str]) -> dict[str, object]:
    code = f"""
import importlib.abc, importlib.machinery, json, sys, time
{STAND_IN}
class Loader(importlib.abc.Loader):
    def create_module(self, spec): return module
    def exec_module(self, m): pass
class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == module.__name__:
            return importlib.machinery.ModuleSpec(name, Loader())
sys.meta_path.append(Finder())
import vllm.distributed.device_communicators.shm_broadcast as shm
{setup}
print(json.dumps(out))
"""
    return _run(code, env, [SHIM])


def test_a_reader_in_the_busy_window_sleeps_instead_of_yielding() -> None:
    """A reader without vLLM's poller: sleeps of poll_us at first, a fiftieth of the wait
    later (at most 2 ms); vLLM's own wait past the window and for the writer."""
    setup = """
slept = []
time.sleep = slept.append
time.monotonic = lambda: now  # a clock that stands still: each wait is exactly its 'ago'
now = 1000.0
reader = shm.SpinCondition(True)
for ago in (0.0, 0.03, 0.5):
    reader.last_read = now - ago
    reader.wait()
reader.last_read = now - 2  # past the window: vLLM's own wait
reader.wait()
writer = shm.SpinCondition(False); writer.wait()
out = {"slept": slept, "reader": reader.original, "writer": writer.original,
       "wrapped": getattr(shm.SpinCondition.wait, "_disagg_wrapped", False)}
"""
    got = _queue(setup, {"DISAGG_VLLM_QUEUE_POLL_US": "200"})
    assert got["wrapped"] is True and got["reader"] == 1 and got["writer"] == 1
    first, later, longest = got["slept"]  # type: ignore[misc]
    assert first == 200e-6
    assert later == pytest.approx(0.03 / 50, rel=1e-9) and longest == 0.002  # float rounding


# vLLM's reader holds a zmq poller over its notification socket and a cancel socket; these
# stand-ins record the poll timeouts and say which socket has a message.
POLLER = """
class Socket:
    def __init__(self, name, pending):
        self.name, self.pending, self.taken = name, pending, 0
    def recv(self, flags=0, copy=True):
        assert flags == 1 and self.pending  # non-blocking, and only what is there
        self.pending -= 1; self.taken += 1
class Poller:
    def __init__(self, *sockets): self.sockets, self.timeouts = sockets, []
    def poll(self, timeout=None):
        self.timeouts.append(timeout)
        return [(s, 1) for s in self.sockets if s.pending]
"""


def test_a_reader_in_the_busy_window_waits_for_the_writer_s_notification() -> None:
    """With vLLM's poller: blocks on it for its pause in whole milliseconds (rounded up)
    instead of sleeping, takes a notification, and leaves a cancellation for vLLM."""
    setup = f"""
{POLLER}
slept = []
time.sleep = slept.append
time.monotonic = lambda: now  # a clock that stands still: each wait is exactly its 'ago'
now = 1000.0
reader = shm.SpinCondition(True)
notify, cancel = Socket("notify", 1), Socket("cancel", 0)
reader.local_notify_socket, reader.poller = notify, Poller(cancel, notify)
for ago in (0.0, 0.06, 0.5):
    reader.last_read = now - ago
    reader.wait()
cancel.pending = 1
reader.wait()
out = {{"slept": slept, "timeouts": reader.poller.timeouts, "notified": notify.taken,
       "cancel": cancel.pending, "reader": reader.original}}
"""
    got = _queue(setup, {"DISAGG_VLLM_QUEUE_POLL_US": "100"})
    # 100 us -> 1 ms; 60 ms / 50 = 1.2 ms -> 2 ms; 0.5 s / 50 capped at 2 ms
    assert got["timeouts"][:3] == [1, 2, 2]
    assert got["notified"] == 1 and got["cancel"] == 1  # the cancellation stays for vLLM
    assert got["slept"] == [] and got["reader"] == 0


def test_no_queue_poll_leaves_vllm_s_wait_alone() -> None:
    setup = """
reader = shm.SpinCondition(True); reader.wait()
out = {"reader": reader.original,
       "wrapped": getattr(shm.SpinCondition.wait, "_disagg_wrapped", False)}
"""
    for env in ({}, {"DISAGG_VLLM_QUEUE_POLL_US": "0"}):
        assert _queue(setup, env) == {"reader": 1, "wrapped": False}


# A stand-in for vLLM 0.32's NIXL connector worker (nixl/base_worker.py): its constructor
# pins the calling thread to the host's highest CPU and starts a thread (as NIXL's agent
# does); the pull worker is a subclass. The model's thread is bound to the lowest CPU first,
# as vLLM's CPU worker binds OpenMP.
NIXL_WORKER = """
import os, threading
PIN = None  # the CPUs the constructor pins to; None: the host's highest

class NixlBaseConnectorWorker:
    def __init__(self):
        os.sched_setaffinity(0, PIN if PIN is not None else {max(os.sched_getaffinity(0) | ALL)})
        self.started = []
        t = threading.Thread(target=lambda: self.started.append(sorted(os.sched_getaffinity(0))))
        t.start(); t.join()

class NixlPullConnectorWorker(NixlBaseConnectorWorker):
    pass

ALL = set()
"""


def _pin(tmp_path: Path, env: dict[str, str], pin: str = "None") -> dict[str, object]:
    package = tmp_path / "vllm" / "distributed" / "kv_transfer" / "kv_connector" / "v1" / "nixl"
    package.mkdir(parents=True)
    for folder in [tmp_path / "vllm", *(p for p in package.relative_to(tmp_path).parents)]:
        (tmp_path / folder / "__init__.py").touch()
    (package / "__init__.py").touch()
    (package / "base_worker.py").write_text(NIXL_WORKER)
    code = f"""
import json, os
allowed = os.sched_getaffinity(0)
os.sched_setaffinity(0, {{min(allowed)}})  # the model's thread, bound as vLLM binds OpenMP
from vllm.distributed.kv_transfer.kv_connector.v1.nixl import base_worker as bw
bw.ALL = allowed; bw.PIN = {pin}
w = bw.NixlPullConnectorWorker()
print(json.dumps({{"main": sorted(os.sched_getaffinity(0)), "started": w.started[0],
                  "lowest": min(allowed), "highest": max(allowed)}}))
"""
    return _run(code, env, [SHIM, tmp_path])


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to see a pin")
def test_the_model_s_thread_keeps_its_cpus_after_the_nixl_pin(tmp_path: Path) -> None:
    got = _pin(tmp_path, {"DISAGG_VLLM_KEEP_CPU_AFFINITY": "1"})
    assert got["main"] == [got["lowest"]]  # its own CPU again
    assert got["started"] == [got["highest"]]  # NIXL's threads keep vLLM's pin


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to see a pin")
def test_without_the_lever_vllm_s_pin_moves_the_model_s_thread(tmp_path: Path) -> None:
    got = _pin(tmp_path, {"DISAGG_VLLM_KEEP_CPU_AFFINITY": "0"})
    assert got["main"] == [got["highest"]] == got["started"]


def test_a_pin_outside_the_cpuset_is_skipped_not_fatal(tmp_path: Path) -> None:
    """vLLM pins to the host's highest CPU; in an exclusive cpuset without it the kernel
    refuses (EINVAL) and vLLM fails to start. A CPU id past any host's stands for it."""
    got = _pin(tmp_path, {"DISAGG_VLLM_KEEP_CPU_AFFINITY": "1"}, pin="{4095}")
    assert got["main"] == [got["lowest"]] == got["started"]
    done = subprocess.run(
        [sys.executable, "-c", "import os; os.sched_setaffinity(0, {4095})"],
        capture_output=True,
        text=True,
    )
    assert "Invalid argument" in done.stderr  # what vLLM meets without the lever
