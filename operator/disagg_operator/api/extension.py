"""What an engine adds to the spec: fields of its own in the blocks it configures, at the
paths users write them (``spec.modelConfig.maxModelLen`` is vLLM's).

An engine declares them as :class:`EngineFields` (a pydantic model per block) in its own
folder; :func:`compose` builds the resource's model from the shared one and every served
engine's fields, and the CRD's schema, the parse and the field table are made from that.
A field only other engines declare is refused by validation (:func:`foreign`), naming the
engines that read it. Part of :mod:`disagg_operator.api`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, create_model

from disagg_operator.api.base import _Model
from disagg_operator.api.roles import DecodeSpec, PrefillSpec
from disagg_operator.api.spec import (
    DeploymentSpec,
    DisaggregatedDeployment,
    KVTransfer,
    ModelConfig,
)


class EngineFields(NamedTuple):
    """An engine's own fields, per block: a model whose fields are added to that block
    (each optional or with a default: the block stays valid without them)."""

    model_spec: type[_Model] | None = None  # spec.modelConfig
    kv_transfer: type[_Model] | None = None  # spec.kvTransfer
    role: type[_Model] | None = None  # spec.prefill and spec.decode


# block → (the DeploymentSpec attribute that holds it, its path in the spec), per place
BLOCKS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "model_spec": (("model_spec", "modelConfig"),),
    "kv_transfer": (("kv_transfer", "kvTransfer"),),
    "role": (("prefill", "prefill"), ("decode", "decode")),
}
_BASES: Mapping[str, type[BaseModel]] = {
    "model_spec": ModelConfig,
    "kv_transfer": KVTransfer,
    "prefill": PrefillSpec,
    "decode": DecodeSpec,
}


def compose(engines: Mapping[str, EngineFields]) -> type[DisaggregatedDeployment]:
    """The resource's model with every engine's fields added to their blocks (the shared
    fields first, then each engine's in table order). Built once per set of engines."""
    return _compose(tuple(engines.items()))


def spec_model(engines: Mapping[str, EngineFields]) -> type[DeploymentSpec]:
    """The spec's model of :func:`compose` (the CRD's ``spec`` schema)."""
    model: type[DeploymentSpec] = compose(engines).model_fields["spec"].annotation  # type: ignore[assignment]
    return model


@functools.cache
def _compose(engines: tuple[tuple[str, EngineFields], ...]) -> type[DisaggregatedDeployment]:
    fields: dict[str, Any] = {}
    for block, places in BLOCKS.items():
        mixins = [getattr(f, block) for _, f in engines if getattr(f, block) is not None]
        if not mixins:
            continue
        for attribute, _path in places:
            model = _block(_BASES[attribute], tuple(mixins))
            fields[attribute] = _field(DeploymentSpec, attribute, model)
    if not fields:
        return DisaggregatedDeployment
    spec = create_model(
        "DeploymentSpec",
        __base__=DeploymentSpec,
        __doc__=DeploymentSpec.__doc__,
        __module__=DeploymentSpec.__module__,
        **fields,
    )
    out: type[DisaggregatedDeployment] = create_model(
        "DisaggregatedDeployment",
        __base__=DisaggregatedDeployment,
        __doc__=DisaggregatedDeployment.__doc__,
        __module__=DisaggregatedDeployment.__module__,
        spec=_field(DisaggregatedDeployment, "spec", spec),
    )
    return out


def _block(base: type[BaseModel], mixins: tuple[type[_Model], ...]) -> type[BaseModel]:
    """``base`` with the mixins' fields after its own; its CEL rules and theirs."""
    rules = [r for m in (base, *mixins) for r in _rules_of(m)]
    config = ConfigDict(**base.model_config)
    if rules:
        config["json_schema_extra"] = {"x-kubernetes-validations": rules}
    namespace = {
        "__doc__": base.__doc__,
        "__module__": base.__module__,
        "__qualname__": base.__qualname__,
        "model_config": config,
    }
    return type(base.__name__, (*reversed(mixins), base), namespace)


def _rules_of(model: type[BaseModel]) -> list[Any]:
    extra = model.model_config.get("json_schema_extra")
    rules = extra.get("x-kubernetes-validations") if isinstance(extra, dict) else None
    return list(rules) if isinstance(rules, list) else []


def _field(owner: type[BaseModel], name: str, model: type[BaseModel]) -> tuple[Any, Any]:
    """``owner``'s field ``name`` (description, alias, defaults) holding ``model``."""
    info = copy.copy(owner.model_fields[name])
    info.annotation = model
    if info.default_factory is not None:
        info.default_factory = model
    return model, info


def foreign(
    spec: DeploymentSpec, engines: Mapping[str, EngineFields], engine: str
) -> Iterator[tuple[str, list[str]]]:
    """(field path, the engines that read it) for each field the spec sets that belongs
    to other engines than ``engine`` (set to other than its default: admission writes the
    defaults of every engine's fields)."""
    own = engines.get(engine, EngineFields())
    for block, places in BLOCKS.items():
        mine = getattr(own, block)
        keep = set(mine.model_fields) if mine is not None else set()
        for attribute, path in places:
            value = getattr(spec, attribute)
            for name in sorted(value.model_fields_set - keep):
                info = type(value).model_fields[name]
                if getattr(value, name) == info.get_default(call_default_factory=True):
                    continue  # the API server writes the CRD's defaults into every object
                owners = [
                    n
                    for n, f in engines.items()
                    if getattr(f, block) is not None and name in getattr(f, block).model_fields
                ]
                if owners:
                    yield f"spec.{path}.{info.alias or name}", owners
