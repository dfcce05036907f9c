"""P/D protocols: how an engine's HTTP API is told to split a request between a prefill
and a decode, and what says where the decode's KV came from.

The interface (:mod:`.base`), vLLM's ``kv_transfer_params`` as one of them
(:mod:`.kv_transfer_params`), and what a decode's answers and metrics say about where its
KV came from (:mod:`.evidence`). The proxy, the router and the canary name a protocol with
``--pd-protocol`` (:func:`resolve`); the operator renders the engine's.

Pure layer: no I/O. :func:`resolve` imports a protocol's module by name.
"""

from __future__ import annotations

import argparse
import importlib

from disagg_worker.serve.pd.base import PdProtocol
from disagg_worker.serve.pd.kv_transfer_params import KV_TRANSFER_PARAMS

__all__ = ["BUILTIN", "DEFAULT", "KV_TRANSFER_PARAMS", "PdProtocol", "add_argument", "resolve"]

BUILTIN: dict[str, PdProtocol] = {KV_TRANSFER_PARAMS.name: KV_TRANSFER_PARAMS}
DEFAULT = KV_TRANSFER_PARAMS.name


def resolve(name: str) -> PdProtocol:
    """The protocol ``name`` names: a built-in one (:data:`BUILTIN`), or ``MODULE:ATTR``,
    an instance of :class:`PdProtocol` an engine ships in a module of its own. ValueError
    naming what to write otherwise."""
    if name in BUILTIN:
        return BUILTIN[name]
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        raise ValueError(
            f"--pd-protocol {name!r}: write one of {', '.join(BUILTIN)}, or MODULE:ATTR "
            "naming an engine's PdProtocol instance"
        )
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"--pd-protocol {name!r}: cannot load it: {e}") from None
    if not isinstance(found, PdProtocol):
        raise ValueError(
            f"--pd-protocol {name!r}: {type(found).__name__} is not a PdProtocol instance"
        )
    return found


def add_argument(parser: argparse.ArgumentParser) -> None:
    """``--pd-protocol`` on ``parser`` (the proxy's and the canary's flag; the operator
    renders the engine's): a name :func:`resolve` takes, parsed into its protocol (a name it
    refuses is the parser's error, with :func:`resolve`'s reason)."""
    parser.add_argument(
        "--pd-protocol", default=DEFAULT, metavar="NAME", type=_protocol,
        help=f"the engines' P/D protocol: {', '.join(BUILTIN)} (vLLM's convention, the "
        "default), or MODULE:ATTR naming an engine's PdProtocol instance",
    )  # fmt: skip


def _protocol(name: str) -> PdProtocol:
    try:
        return resolve(name)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
