"""spec.routing rendered for llm-d's endpoint picker: an EndpointPickerConfig that
llm-d-router v0.10.0's loader accepts (its rules restated in contracts.llmd, each tested
here on the configs it must refuse)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from disagg_operator.contracts.llmd import (
    EPP_CONFIG_KEY,
    MIN_BLOCK_SIZE_TOKENS,
    epp_config_problems,
)
from disagg_operator.render.objects import render
from tests.operator.builders import GPU, body, role

KEY = "k" * 32


def _config(obj: dict[str, Any]) -> dict[str, Any]:
    (cm,) = [o for o in render(obj, hmac_key=KEY) if o["metadata"]["name"] == "demo-epp-config"]
    loaded: dict[str, Any] = yaml.safe_load(cm["data"][EPP_CONFIG_KEY])
    return loaded


def _plugin(config: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(p for p in config["plugins"] if p["type"] == kind)


def _handler_decider(config: dict[str, Any]) -> dict[str, Any]:
    name = _plugin(config, "disagg-profile-handler")["parameters"]["deciders"]["prefill"]
    return next(p for p in config["plugins"] if (p.get("name") or p["type"]) == name)


def test_no_picker_config_without_llmd() -> None:
    names = [o["metadata"]["name"] for o in render(body(), hmac_key=KEY)]
    assert "demo-epp-config" not in names


def test_always_renders_the_always_decider_and_loads() -> None:
    config = _config(body(llmd={"enabled": True}))
    assert epp_config_problems(config) == []
    assert _handler_decider(config)["type"] == "always-disagg-pd-decider"
    assert [p["name"] for p in config["schedulingProfiles"]] == ["prefill", "decode"]


@pytest.mark.parametrize(
    ("tokens", "decider"), [(300, "prefix-based-pd-decider"), (0, "always-disagg-pd-decider")]
)
def test_the_threshold_is_the_deciders_non_cached_tokens(tokens: int, decider: str) -> None:
    routing = {"disaggregate": "threshold", "thresholdTokens": tokens}
    config = _config(body(engine="vllm", llmd={"enabled": True}, routing=routing))
    assert epp_config_problems(config) == []
    found = _handler_decider(config)
    assert found["type"] == decider
    if tokens:  # llm-d's nonCachedTokens 0 would mean never: 0 is rendered as always
        assert found["parameters"] == {"nonCachedTokens": tokens}
    # vLLM's CPU block is the prefix index's unit
    producer = _plugin(config, "approx-prefix-cache-producer")
    assert producer["parameters"] == {"autoTune": False, "blockSizeTokens": 128}


@pytest.mark.parametrize(
    ("decode", "block_size", "tokens"),
    [("cuda", None, 64), ("cuda", 32, 64), ("cuda", 48, 96), ("cpu", 128, 128)],
)
def test_the_prefix_block_is_the_engines_unit_raised_to_the_routers_floor(
    decode: str, block_size: int | None, tokens: int
) -> None:
    """llm-d's approx-prefix-cache-producer raises a blockSizeTokens below its floor (64) to
    the floor at request time: the render writes what runs, the smallest multiple of the
    engine's block at or above it (vLLM's GPU default of 16 → 64, CPU's 128 stays)."""
    model = {} if block_size is None else {"modelConfig": {"blockSize": block_size}}
    pools = {r: role(d, resources=GPU) if d == "cuda" else role(d)
             for r, d in (("prefill", "cuda"), ("decode", decode))}  # fmt: skip
    spec = body(engine="vllm", llmd={"enabled": True}, **pools, **model)
    producer = _plugin(_config(spec), "approx-prefix-cache-producer")
    assert producer["parameters"]["blockSizeTokens"] == tokens >= MIN_BLOCK_SIZE_TOKENS
    assert tokens % (block_size or 16) == 0  # vLLM's GPU default block


GOOD = _config(body(engine="vllm", llmd={"enabled": True},
                    routing={"disaggregate": "threshold", "thresholdTokens": 64}))  # fmt: skip


def _broken(change: Any) -> list[str]:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return epp_config_problems(doc)


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(data={}), "data: unknown field"),
        (lambda d: d.update(apiVersion="llm-d.ai/v1"), "apiVersion/kind"),
        (lambda d: d.update(featureGates=["fast"]), "'fast' is unknown"),
        (
            lambda d: _decider(d).update(parameters={"threshold": 0}),
            "nonCachedTokens (0 means never",
        ),
        (
            lambda d: _decider(d).update(parameters={"nonCachedTokens": -1}),
            "must be an integer >= 0",
        ),
        (lambda d: _producer(d)["parameters"].update(hashBlockSize=5), "blockSizeTokens"),
        (
            lambda d: d["plugins"].append({"type": "disagg-profile-handler"}),
            "duplicate plugin name",
        ),
        (lambda d: d["plugins"].append({"type": "no-such-plugin"}), "not registered"),
        (
            lambda d: d["schedulingProfiles"][1]["plugins"].append({"pluginRef": "x"}),
            "'x' is not a defined plugin",
        ),
        (
            lambda d: _handler(d).update(parameters={"deciders": {"prefill": "queue-scorer"}}),
            "is not a decider",
        ),
        (
            lambda d: _handler(d).update(parameters={"deciders": {"prefill": "gone"}}),
            "plugin 'gone' not found",
        ),
        (lambda d: _handler(d).update(parameters={"stageOrder": "sideways"}), "stageOrder"),
        (lambda d: d["plugins"].remove(_handler(d)), "exactly one profile handler"),
    ],
)
def test_what_the_loader_refuses_is_refused(change: Any, says: str) -> None:
    problems = _broken(change)
    assert any(says in p for p in problems), problems


def _decider(d: dict[str, Any]) -> dict[str, Any]:
    return _plugin(d, "prefix-based-pd-decider")


def _producer(d: dict[str, Any]) -> dict[str, Any]:
    return _plugin(d, "approx-prefix-cache-producer")


def _handler(d: dict[str, Any]) -> dict[str, Any]:
    return _plugin(d, "disagg-profile-handler")


def test_a_single_profile_needs_no_handler_and_ignored_parameters_pass() -> None:
    one = {
        "apiVersion": "llm-d.ai/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "queue-scorer", "parameters": {"anything": 1}}],
        "schedulingProfiles": [{"name": "default", "plugins": [{"pluginRef": "queue-scorer"}]}],
    }
    assert epp_config_problems(one) == []  # queue-scorer's factory never reads its parameters


PRECISE = _config(body(engine="vllm", llmd={"enabled": True},
                       routing={"disaggregate": "threshold", "prefixIndex": "events"}))  # fmt: skip


def test_events_render_the_precise_producer_and_load() -> None:
    """With prefixIndex events the scorer reads llm-d's precise producer, which subscribes
    to every pool endpoint on the port the pods publish on, in the engine's block, over
    token ids the decode's vLLM renders (upstream's deploy/config/epp-precise-prefix-cache-
    config.yaml at v0.10.0 is the shape)."""
    assert epp_config_problems(PRECISE) == []
    producer = _plugin(PRECISE, "precise-prefix-cache-producer")["parameters"]
    assert producer["tokenProcessorConfig"] == {"blockSizeTokens": 128, "hashSeed": "0"}
    assert producer["kvEventsConfig"] == {
        "topicFilter": "kv@", "discoverPods": True, "podDiscoveryConfig": {"socketPort": 5557},
    }  # fmt: skip
    scorer = _plugin(PRECISE, "prefix-cache-scorer")["parameters"]
    assert scorer == {"prefixMatchInfoProducerName": "precise-prefix-cache-producer"}
    tokens = _plugin(PRECISE, "token-producer")["parameters"]
    assert tokens == {"modelName": "Qwen/Qwen3-0.6B",
                      "vllm": {"url": "http://demo-decode.ns.svc:8000"}}  # fmt: skip
    assert PRECISE["dataLayer"] == {"sources": [{
        "pluginRef": "endpoint-notification-source",
        "extractors": [{"pluginRef": "precise-prefix-cache-producer"}],
    }]}  # fmt: skip
    assert not any(p["type"] == "approx-prefix-cache-producer" for p in PRECISE["plugins"])


def _precise(d: dict[str, Any]) -> dict[str, Any]:
    params: dict[str, Any] = _plugin(d, "precise-prefix-cache-producer")["parameters"]
    return params


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: _precise(d)["tokenProcessorConfig"].update(seed="0"),
         "tokenProcessorConfig.seed: unknown field"),
        (lambda d: _precise(d)["kvEventsConfig"].update(port=5557),
         "kvEventsConfig.port: unknown field"),
        (lambda d: _precise(d)["kvEventsConfig"]["podDiscoveryConfig"].update(port=1),
         "podDiscoveryConfig.port: unknown field"),
        (lambda d: _plugin(d, "token-producer")["parameters"].pop("modelName"),
         "modelName: required with the vllm backend"),
        (lambda d: d["dataLayer"]["sources"][0]["extractors"].append({"pluginRef": "nope"}),
         "'nope' is not a defined plugin"),
        (lambda d: d["dataLayer"].update(source=[]), "dataLayer.source: unknown field"),
    ],
)  # fmt: skip
def test_what_the_loader_refuses_in_the_precise_pipeline(change: Any, says: str) -> None:
    doc = copy.deepcopy(PRECISE)
    change(doc)
    problems = epp_config_problems(doc)
    assert any(says in p for p in problems), problems
