"""docs/derivation.md: every value the operator derives, with its inputs and reason, from
the code that derives it.

The engine-independent rows (buffer devices, UCX transports, accelerator resources from the
settings' platforms, side-channel host, backends, grace), each engine's own rows
(:meth:`EngineDocs.derivation_rows`), the canary's, then each engine's own tables
(:meth:`EngineDocs.derivation_tables`: vLLM's per-version capability table), the UCX
transports and the NIXL backends. ``python -m disagg_operator.render.derivation`` prints it
and a unit test keeps the page in sync.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType

from disagg_contract import platforms, ucx
from disagg_operator.derive import scaling
from disagg_operator.engines.base import EngineDocs, Row
from disagg_operator.engines.reference.docs import ReferenceDocs
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.engines.vllm.docs import VllmDocs
from disagg_operator.render import canary
from disagg_operator.render.pods import SHUTDOWN_MARGIN_S

# spec.engine.type → what that engine adds to these pages
ENGINE_DOCS: Mapping[str, EngineDocs] = MappingProxyType(
    {d.name: d for d in (VllmDocs(), ReferenceDocs())}
)


def _docs(settings: Settings, docs: Mapping[str, EngineDocs]) -> list[EngineDocs]:
    """The docs of the engines ``settings`` serves, in its order (an engine without: none)."""
    return [docs[name] for name in settings.engines if name in docs]


def _buffer_rows(settings: Settings) -> list[Row]:
    rows = []
    table = settings.platforms
    for device in sorted(table):
        for peer in sorted(table):
            derived = platforms.derive_buffer_device(device, peer, table)
            why = (
                "same device both sides: the native buffer"
                if device == peer
                else "different devices: stage through host memory (DRAM both ends)"
                if derived == "cpu"
                else "no host buffer on this platform: native buffer"
            )
            rows.append(("kvBufferDevice", f"device {device}, peer {peer}", derived, why))
    return rows


def _platform_rows(settings: Settings) -> list[Row]:
    rows: list[Row] = []
    for name, p in sorted(settings.platforms.items()):
        why = "unless kvTransfer.ucxTls; no cma/sm/*_ipc" + (f"; {p.note}" if p.note else "")
        rows.append(("UCX_TLS", f"device {name}", p.ucx_tls, why))
        if p.accelerator_resource:
            rows.append(
                ("required limit", f"device {name}", p.accelerator_resource, "gets the device")
            )
        if p.vllm_device != name:
            rows.append(
                (
                    "vLLM device type",
                    f"device {name}",
                    p.vllm_device,
                    "what vLLM reports there; NixlConnector checks kv_buffer_device "
                    "against that row of its table",
                )
            )
    return rows


def derivation_rows(
    settings: Settings = DEFAULT, docs: Mapping[str, EngineDocs] = ENGINE_DOCS
) -> list[Row]:
    """(value, inputs, result, reason) for every derived value of the engines ``settings``
    serves (their rows from ``docs``)."""
    rows = _buffer_rows(settings) + _platform_rows(settings)
    rows += [
        ("side-channel host", "any", "pod IP (fieldRef status.podIP)", "peers dial the pod IP"),
        (
            "NIXL backends",
            "any",
            "kvTransfer.backends (default UCX)",
            "checked per memory type; one must reach another pod (the NIXL backend table)",
        ),
        (
            "preStop settle",
            "spec.router.enabled",
            f"router: {scaling.ROUTER_REFRESH_S + scaling.DNS_TTL_S} s (its "
            f"{scaling.ROUTER_REFRESH_S} s refresh + the {scaling.DNS_TTL_S} s DNS TTL); "
            f"else {scaling.ENDPOINTS_PROPAGATION_S} s",
            "a terminating pod serves on until its endpoint clients have seen it leave",
        ),
        (
            "preStop wait",
            "the engine's drain D (below), spec.<role>.drainSeconds S",
            "max(D, S) after the settle",
            "S: the longest generation a terminating pod may be serving",
        ),
        (
            "terminationGracePeriodSeconds",
            "the preStop's time T (settle + wait)",
            f"T + {SHUTDOWN_MARGIN_S}",
            "the drain, then time for the engine to stop on SIGTERM",
        ),
    ]
    for engine in _docs(settings, docs):
        rows += engine.derivation_rows(settings)
    return rows + canary.derivation_rows()


def derivation_table(
    settings: Settings = DEFAULT, docs: Mapping[str, EngineDocs] = ENGINE_DOCS
) -> str:
    """The markdown tables in docs/derivation.md: derived values, each engine's own tables
    (vLLM: its per-version profiles), then the UCX transports and their reach, then the
    NIXL backends."""
    lines = ["| value | inputs | result | reason |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | `{c}` | {d} |" for a, b, c, d in derivation_rows(settings, docs)]
    tables = [t.rstrip("\n") for e in _docs(settings, docs) for t in e.derivation_tables()]
    backends = platforms.backend_markdown_table()
    return "\n\n".join(["\n".join(lines), *tables, ucx.markdown_table(), backends])


if __name__ == "__main__":
    sys.stdout.write(derivation_table())
