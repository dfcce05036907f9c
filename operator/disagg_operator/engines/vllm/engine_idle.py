"""The NIXL idle shim as the operator ships it: the source of ``sitecustomize.py`` that
raises NIXL's progress-thread delay inside a vLLM engine (see
``disagg_worker/vllm/engine_idle/sitecustomize.py`` for what it does and why).

Immutable data read once from the worker package, so the ConfigMap the operator renders
holds exactly the file the tests run and the local run puts on an engine's PYTHONPATH.
"""

from __future__ import annotations

from importlib import resources

FILE = "sitecustomize.py"
FOLDER = resources.files("disagg_worker.vllm").joinpath("engine_idle")
SOURCE: str = FOLDER.joinpath(FILE).read_text()
