"""The NIXL idle shim as the operator ships it: the source of ``sitecustomize.py`` that
raises NIXL's progress-thread delay inside a vLLM engine (see
``idle_shim/sitecustomize.py`` beside this module for what it does and why).

Immutable data read once from this package, so the ConfigMap the operator renders
holds exactly the file the tests run and the local run puts on an engine's PYTHONPATH.
"""

from __future__ import annotations

from importlib import resources

FILE = "sitecustomize.py"
FOLDER = resources.files("disagg_operator.engines.vllm").joinpath("idle_shim")
SOURCE: str = FOLDER.joinpath(FILE).read_text()
