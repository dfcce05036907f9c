"""The reference engine's part of the generated docs: its rows of docs/derivation.md
(:class:`~disagg_operator.engines.base.EngineDocs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from disagg_contract.config import WorkerConfig
from disagg_operator.engines.base import EngineDocs, Row
from disagg_operator.engines.reference.engine import NAME, STARTUP_S

if TYPE_CHECKING:
    from disagg_operator.engines.settings import Settings


class ReferenceDocs(EngineDocs):
    name = NAME

    def derivation_rows(self, settings: Settings) -> list[Row]:
        return [
            (
                "startupProbe budget",
                "reference engine",
                f"{STARTUP_S} s; spec.<role>.startupSeconds wins",
                "a seeded model built in memory starts in seconds",
            ),
            (
                WorkerConfig.env_name("transfer_mode"),
                "reference engine, kvTransfer.mode push",
                "push (both pools; pull renders none: the worker's read)",
                "decode claims blocks and the prefill WRITEs into them; a pool's own setting "
                "is refused (it would pair a push decode with a pull prefill)",
            ),
            (
                "side-channel port",
                "reference engine, TP rank r",
                "sideChannelPort + r",
                "a listener per TP rank",
            ),
            (
                "preStop",
                "reference, deadline D, lease L",
                "disagg worker drain --settle-s E --timeout-s ceil(D + L)",
                "serves on for the settle E (the preStop settle row), then waits until "
                "/debug/blocks shows nothing held, used or waiting: a hold lasts at most L, "
                "a read started at its end at most D",
            ),
        ]
