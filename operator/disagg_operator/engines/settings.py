"""The operator's settings: which engines and platforms it serves and the canary's default
image, as one value passed to render, validation and status.

``disagg operator`` and ``disagg render`` build one from
their flags (:mod:`disagg_operator.controller.options`); tests build their own. Nothing here
is process state: two operators in one process, each with its own settings, render each
its own way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from disagg_contract import platforms
from disagg_contract.platforms import Platform, Table
from disagg_operator.api import DeploymentSpec, DisaggregatedDeployment, compose, spec_model
from disagg_operator.engines.base import Engine, spec_fields
from disagg_operator.engines.reference.engine import Reference
from disagg_operator.engines.vllm.engine import Vllm

# spec.engine.type → the engine; the order is the CRD's (its enum and description).
BUILTIN_ENGINES: Mapping[str, Engine] = MappingProxyType({e.name: e for e in (Vllm(), Reference())})


@dataclass(frozen=True)
class Settings:
    """``platforms``: device name → platform (the built-ins plus a platforms file's);
    ``canary_image``: the transfer canary's image for engines whose images have no
    ``disagg`` command (``--canary-image``); ``engines``: spec.engine.type → engine."""

    platforms: Table = field(default_factory=lambda: platforms.BUILTIN_TABLE)
    canary_image: str | None = None
    engines: Mapping[str, Engine] = field(default_factory=lambda: BUILTIN_ENGINES)

    def engine(self, spec: DeploymentSpec) -> Engine:
        """The engine of a validated spec (validation refuses a type not in the table)."""
        return self.engines[spec.engine.type]

    @property
    def model(self) -> type[DisaggregatedDeployment]:
        """The resource's model with the fields of every engine served (built once per set
        of engines): what validation parses with and the CRD is made from."""
        return compose(spec_fields(self.engines))

    @property
    def spec_model(self) -> type[DeploymentSpec]:
        """The spec's model of :attr:`model`."""
        return spec_model(spec_fields(self.engines))

    def with_platforms(self, declared: Iterable[Platform]) -> Settings:
        return replace(self, platforms=platforms.extend(self.platforms, declared))

    def with_engines(self, *engines: Engine) -> Settings:
        return replace(
            self, engines=MappingProxyType({**self.engines, **{e.name: e for e in engines}})
        )


DEFAULT = Settings()
