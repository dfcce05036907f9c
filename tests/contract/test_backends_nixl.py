"""The NIXL backend table (disagg_contract.platforms.BACKENDS, restated from ai-dynamo/nixl
v1.4.0's plugin sources) against the NIXL installed here (nixl-cu12, the worker extra).

Each plugin the wheel ships is in the table under the name it registers; each one whose
parameters load here declares the memory types its row lists; and a backend the table
calls local-only never carries a transfer to another agent while UCX does, with both
registered on the same memory (what makes ``backends: [UCX, GDS]`` a UCX wire). NIXL runs
in a child process: its agents start threads the test process should not keep.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from disagg_contract import platforms

PROBE = """
import json, numpy as np
import nixl_cu12._api as api
api.logger.disabled = True
out = {"plugins": {}, "prep": {}}
probe = api.nixl_agent("probe", api.nixl_agent_config(backends=[]))
for plugin in probe.get_plugin_list():
    mems = probe.get_plugin_mem_types(plugin)
    out["plugins"][plugin] = sorted(m.removesuffix("_SEG") for m in mems) if mems else None
# Two agents on one DRAM buffer: A registers it with UCX and a local-only plugin, B loads
# A's metadata and prepares a transfer from it on each backend alone.
a = api.nixl_agent("A", api.nixl_agent_config(backends=["UCX"]))
b = api.nixl_agent("B", api.nixl_agent_config(backends=["UCX"]))
for agent in (a, b):
    agent.create_backend("POSIX")
buf = np.zeros(4096, dtype=np.uint8)
registered = a.get_reg_descs([(buf.ctypes.data, 4096, 0, "")], "DRAM")
a.register_memory(registered, backends=["UCX", "POSIX"])
remote = b.add_remote_agent(a.get_agent_metadata())
descs = b.get_xfer_descs([(buf.ctypes.data, 4096, 0)], "DRAM")
for backend in ("UCX", "POSIX"):
    try:
        b.release_dlist_handle(b.prep_xfer_dlist(remote, descs, backends=[backend]))
        out["prep"][backend] = True
    except Exception:
        out["prep"][backend] = False
print(json.dumps(out))
"""


def _probe() -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_nixl_v1_4_0_backend_rows_match_the_installed_nixl() -> None:
    found = _probe()
    shipped = set(found["plugins"])
    assert shipped <= set(platforms.BACKEND_TABLE), shipped - set(platforms.BACKEND_TABLE)
    loaded = {p: mems for p, mems in found["plugins"].items() if mems is not None}
    # the plugins that load without their hardware or service here; the others (GDS,
    # LIBFABRIC, GPUNETIO, INFINIA) need CUDA, cuFile, EFA or DOCA to answer
    assert {"UCX", "POSIX", "OBJ"} <= set(loaded), loaded
    for plugin, mems in loaded.items():
        assert set(mems) == platforms.BACKEND_TABLE[plugin].memory, plugin
    # remote: what a peer agent can prepare a transfer on
    assert found["prep"] == {
        name: platforms.BACKEND_TABLE[name].remote for name in ("UCX", "POSIX")
    }
    assert found["prep"] == {"UCX": True, "POSIX": False}
