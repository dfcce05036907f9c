"""llm-d's endpoint picker config for a deployment: ``spec.routing`` as an
EndpointPickerConfig in the ConfigMap ``<name>-epp-config`` (key ``epp-config.yaml``).

The same policy the disagg router applies (docs/routing.md), in llm-d-router v0.10.0's terms
(:mod:`disagg_operator.contracts.llmd`):

- ``disaggregate: always`` (or a threshold of 0): ``always-disagg-pd-decider``;
- ``disaggregate: threshold``: ``prefix-based-pd-decider`` with ``nonCachedTokens`` the
  threshold: prefill only when the prompt's tokens not in the chosen decode pod's prefix
  cache reach it (llm-d's ``nonCachedTokens: 0`` would mean never, so 0 is rendered as
  always);
- both profiles, ``prefill`` and ``decode`` (the handler's names), pick by the role label
  (``prefill-filter``, ``decode-filter``), prefix affinity (``prefix-cache-scorer`` over an
  ``approx-prefix-cache-producer`` in the engine's KV block) and load (``queue-scorer``),
  as the disagg router picks by prefix, then least in-flight.

``prefillQueueLimit`` has no equivalent in the picker's deciders: the disagg router only.
With ``prefixIndex: events`` the prefix scorer reads llm-d's precise producer instead, fed
by the same KV events the pods publish for the disagg router (:func:`_precise`).
"""

from __future__ import annotations

from typing import Any

import yaml

from disagg_operator.api import DeploymentSpec
from disagg_operator.contracts import llmd
from disagg_operator.engines.settings import Settings
from disagg_operator.engines.vllm import kv_events as vllm_events

PREFIX_WEIGHT, LOAD_WEIGHT = 2, 1  # as llm-d's own P/D sample weighs them


def name_of(name: str) -> str:
    return f"{name}-epp-config"


def config(
    spec: DeploymentSpec, settings: Settings, tokenizer_url: str = "http://localhost:8000"
) -> dict[str, Any]:
    """The EndpointPickerConfig of ``spec.routing``; ``tokenizer_url``: a vLLM that renders
    prompts to token ids for the precise producer (with ``prefixIndex: events``)."""
    routing = spec.routing
    if routing.disaggregate == "threshold" and routing.threshold_tokens > 0:
        decider: dict[str, Any] = {
            "type": llmd.THRESHOLD_DECIDER,
            "parameters": {"nonCachedTokens": routing.threshold_tokens},
        }
    else:
        decider = {"type": llmd.ALWAYS_DECIDER}
    producer: dict[str, Any] = {"type": "approx-prefix-cache-producer"}
    block = settings.engine(spec).prefix_cache_block(spec)
    if block is not None:  # the engine's own unit, not llm-d's guess, at llm-d's floor
        tokens = llmd.prefix_block_tokens(block)
        producer["parameters"] = {"autoTune": False, "blockSizeTokens": tokens}
    handler = {
        "type": llmd.PROFILE_HANDLER,
        "parameters": {"deciders": {"prefill": decider["type"]}},
    }
    scorer: dict[str, Any] = {"type": "prefix-cache-scorer"}
    extra: dict[str, Any] = {}
    if block is not None and settings.engine(spec).kv_events_router_args(spec):
        producers, extra = _precise(spec, block, tokenizer_url)
        scorer["parameters"] = {"prefixMatchInfoProducerName": llmd.PRECISE_PRODUCER}
    else:
        producers = [producer]
    plugins = [*producers, scorer, {"type": "queue-scorer"},
               {"type": "prefill-filter"}, {"type": "decode-filter"},
               {"type": "max-score-picker"}, handler, decider]  # fmt: skip
    return {
        "apiVersion": llmd.EPP_API_VERSION,
        "kind": llmd.EPP_KIND,
        "plugins": plugins,
        **extra,
        "schedulingProfiles": [
            _profile(llmd.PREFILL_PROFILE, "prefill-filter"),
            _profile(llmd.DECODE_PROFILE, "decode-filter"),
        ],
    }


def _precise(
    spec: DeploymentSpec, block: int, tokenizer_url: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """llm-d's precise pipeline over the pods' KV events: the engine's own token ids (a
    vLLM token-producer), the producer subscribing to every pool endpoint on the events
    port, in the engine's block; and the data layer that tells it of endpoints."""
    served = spec.served_model_name or spec.model
    tokens: dict[str, Any] = {"type": llmd.TOKEN_PRODUCER,
              "parameters": {"modelName": served, "vllm": {"url": tokenizer_url}}}  # fmt: skip
    events = {"topicFilter": vllm_events.TOPIC_PREFIX, "discoverPods": True,
              "podDiscoveryConfig": {"socketPort": vllm_events.EVENTS_PORT}}  # fmt: skip
    producer: dict[str, Any] = {
        "type": llmd.PRECISE_PRODUCER,
        "parameters": {
            "tokenProcessorConfig": {"blockSizeTokens": block, "hashSeed": vllm_events.HASH_SEED},
            "kvEventsConfig": events,
        },
    }
    source = {"pluginRef": llmd.NOTIFICATION_SOURCE,
              "extractors": [{"pluginRef": llmd.PRECISE_PRODUCER}]}  # fmt: skip
    plugins = [tokens, {"type": llmd.NOTIFICATION_SOURCE}, producer]
    return plugins, {"dataLayer": {"sources": [source]}}


def _profile(name: str, role_filter: str) -> dict[str, Any]:
    return {
        "name": name,
        "plugins": [
            {"pluginRef": role_filter},
            {"pluginRef": "max-score-picker"},
            {"pluginRef": "prefix-cache-scorer", "weight": PREFIX_WEIGHT},
            {"pluginRef": "queue-scorer", "weight": LOAD_WEIGHT},
        ],
    }


def data(
    spec: DeploymentSpec, settings: Settings, tokenizer_url: str = "http://localhost:8000"
) -> dict[str, str]:
    """The ConfigMap's data: the config as YAML under llm-d's key."""
    text = yaml.safe_dump(config(spec, settings, tokenizer_url), sort_keys=False)
    return {llmd.EPP_CONFIG_KEY: text}
