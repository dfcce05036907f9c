"""The NIXL idle shim (worker/vllm/engine_idle/sitecustomize.py) in a fresh interpreter, as
an engine gets it: first on PYTHONPATH, NIXL imported later by the engine's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHIM = Path(__file__).resolve().parents[3] / "worker" / "vllm" / "engine_idle"
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
    assert got == {"applied": [1000], "image": True}
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
    assert got == {"applied": [1000], "finders": 1}


def test_the_shim_is_what_the_operator_ships() -> None:
    from disagg_operator.contracts import engine_idle

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
    """Sleeps of poll_us at first, a fiftieth of the wait later (at most 2 ms); vLLM's own
    wait past the window and for the writer."""
    setup = """
slept = []
time.sleep = slept.append
reader = shm.SpinCondition(True)
now = time.monotonic()
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
    assert first == pytest.approx(200e-6, rel=0.2)
    assert later == pytest.approx(0.03 / 50, rel=0.2) and longest == 0.002


def test_no_queue_poll_leaves_vllm_s_wait_alone() -> None:
    setup = """
reader = shm.SpinCondition(True); reader.wait()
out = {"reader": reader.original,
       "wrapped": getattr(shm.SpinCondition.wait, "_disagg_wrapped", False)}
"""
    for env in ({}, {"DISAGG_VLLM_QUEUE_POLL_US": "0"}):
        assert _queue(setup, env) == {"reader": 1, "wrapped": False}
