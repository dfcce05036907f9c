"""The toy engine's operator plugin: ``toy-serve --role ROLE --listen PORT``, no side
channel, and its own P/D protocol (:mod:`.pd`), which the router and the canary are told
by ``--pd-protocol``; :class:`ToyRooms` is the same server told to speak its rooms protocol
(:mod:`.rooms`, both hops at once). How its pods run here is :mod:`.local`'s."""

from __future__ import annotations

from typing import ClassVar

from disagg_operator.api import DeploymentSpec
from disagg_operator.engines.base import Container, DemandSeries, Engine
from disagg_operator.engines.settings import Settings


class Toy(Engine):
    name: ClassVar[str] = "toy"
    summary: ClassVar[str] = "a test engine with its own P/D protocol"
    pd_protocol: ClassVar[str] = "tests.support.toy_engine.pd:PROTOCOL"
    demand = DemandSeries("toy_prompt_total", "toy_output_total", "toy_requests_total",
                          "toy_running")  # fmt: skip

    def container(
        self, spec: DeploymentSpec, role: str, port: int, settings: Settings
    ) -> Container:
        return Container(["toy-serve", "--role", role, "--listen", str(port)], [])

    def side_channel_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        return []

    def drain_seconds(self, spec: DeploymentSpec) -> int:
        return 2  # its KV waits for a decode only within one request


class ToyRooms(Toy):
    """The toy engine speaking its rooms protocol (SGLang's shape: both hops at once)."""

    name: ClassVar[str] = "toy-rooms"
    summary: ClassVar[str] = "a test engine whose P/D protocol sends both hops at once"
    pd_protocol: ClassVar[str] = "tests.support.toy_engine.rooms:PROTOCOL"
