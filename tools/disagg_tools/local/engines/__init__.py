"""The local-run seam: how a local run (`disagg up`, the local kubelet) runs one engine's
pods on this host, one module per engine (:mod:`.reference`, :mod:`.vllm`) implementing
:class:`~.base.LocalEngine`, looked up by the engine's name (``spec.engine.type``). The
product's engines know nothing of local runs; an engine of its own (a test's) brings its
module and passes it in a table of its own.

Pure layer: commands and env, no processes (the import contract in pyproject.toml holds it
to it).
"""

from __future__ import annotations

from collections.abc import Mapping

from disagg_tools.local.engines.base import LocalEngine, LocalProcess, LocalRun
from disagg_tools.local.engines.reference import Reference
from disagg_tools.local.engines.vllm import Vllm

__all__ = ["BUILTIN", "LocalEngine", "LocalProcess", "LocalRun", "local_engine"]

BUILTIN: Mapping[str, LocalEngine] = {e.name: e for e in (Reference(), Vllm())}


def local_engine(name: str, engines: Mapping[str, LocalEngine] = BUILTIN) -> LocalEngine:
    """The local-run part of engine ``name``; ValueError naming the engines that have one."""
    if name not in engines:
        known = ", ".join(sorted(engines))
        raise ValueError(
            f"engine {name!r} has no local-run module (tools/disagg_tools/local/engines/); "
            f"local runs know {known}"
        )
    return engines[name]
