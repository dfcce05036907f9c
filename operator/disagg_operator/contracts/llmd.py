"""llm-d's routing sidecar (the pd-sidecar of llm-d-router): the command line the operator
renders for it and the flags a spec may not pass.

The one source of truth for this external contract: render, validation and the
docs read it. Source: llm-d/llm-d-router ``pkg/sidecar/proxy/options.go`` at v0.10.0, and its
own decode manifests (``deploy/components/vllm-decode/deployment.yaml``), which pass
``--port=8000`` and ``--secure-proxy=false``. v0.10.0 removed ``--connector`` (use
``--kv-connector``, since v0.7.0) and deprecated ``--vllm-port`` for ``--model-server-port``
(RELEASE-NOTES.md, pull requests 2054 and 2142); the image moved from
``llm-d-routing-sidecar`` to ``llm-d-router-disagg-sidecar``.
"""

from __future__ import annotations

from typing import Any

MIN_VERSION = "v0.10.0"
# What the sidecar answers 200 on once it serves (pkg/sidecar/proxy/proxy.go, createRoutes):
# its readiness, so a decode pod is not Ready before the pod's port listens.
HEALTH_PATH = "/health"
IMAGE_EXAMPLE = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:{MIN_VERSION}"
# vLLM's NixlConnector, as the sidecar names its protocol.
KV_CONNECTOR = "nixlv2"

# Flags the operator sets → why a spec may not set them too.
DERIVED_FLAGS: dict[str, str] = {
    "--port": "the sidecar serves the pod's port, fixed at 8000",
    "--model-server-port": "the engine behind the sidecar listens on 8200",
    "--kv-connector": f"the engine's connector is NixlConnector ({KV_CONNECTOR})",
}
# Flags older sidecars took → what to write instead (refused: the v0.10.0 sidecar exits on
# an unknown flag, or would fight the derived value).
RETIRED_FLAGS: dict[str, str] = {
    "--connector": "removed in llm-d-router v0.10.0; the operator sets --kv-connector",
    "--vllm-port": "deprecated in llm-d-router v0.10.0; the operator sets --model-server-port",
    "--prefiller-use-tls": "removed in llm-d-router v0.10.0; use --enable-tls=prefiller",
    "--decoder-use-tls": "removed in llm-d-router v0.10.0; use --enable-tls=decoder",
    # in v0.9.0's options.go, gone from v0.10.0's (its list flag takes the stages)
    "--prefiller-tls-insecure-skip-verify": "removed in llm-d-router v0.10.0; use "
    "--tls-insecure-skip-verify=prefiller",
    "--decoder-tls-insecure-skip-verify": "removed in llm-d-router v0.10.0; use "
    "--tls-insecure-skip-verify=decoder",
}


def args(port: int, model_server_port: int) -> list[str]:
    """The sidecar's derived arguments. ``--secure-proxy=false``: the sidecar serves TLS
    with a self-signed certificate by default, while the InferencePool's targetPort speaks
    plain HTTP (appProtocol http) as the engine does; a spec may set it back to true."""
    return [
        f"--port={port}",
        f"--model-server-port={model_server_port}",
        f"--kv-connector={KV_CONNECTOR}",
        "--secure-proxy=false",
    ]


def flag_problem(arg: str) -> str | None:
    """Why ``arg`` (one entry of routingSidecar.args) is refused, or None."""
    name = arg.split("=", 1)[0]
    if name.startswith("-") and not name.startswith("--"):
        name = "-" + name  # Go flags accept -port as well as --port
    if name in DERIVED_FLAGS:
        return f"{name} is set by the operator: {DERIVED_FLAGS[name]}; remove it"
    if name in RETIRED_FLAGS:
        return f"{name} is {RETIRED_FLAGS[name]}; remove it"
    return None


# --- The endpoint picker's scheduler config (EndpointPickerConfig) -------------------------
# Source: llm-d/llm-d-router v0.10.0 (commit 71f4f099): apix/config/v1alpha1
# (endpointpickerconfig_types.go), pkg/epp/config/loader/configloader.go (strict decoding:
# unknown and duplicate keys fail; one profile handler; every pluginRef defined), and each
# plugin's factory under pkg/epp/framework/plugins (parameters decoded with
# DisallowUnknownFields unless the factory ignores its decoder). The Go loader cannot be
# built here (its ~180 modules come from the Go module proxy, which this project's machines
# cannot reach), so :func:`epp_config_problems` restates those rules and the tests hold the
# rendered config to it.
EPP_API_VERSION = "llm-d.ai/v1alpha1"  # v0.10.0 has no llm-d.ai/v1 (a later router adds it)
EPP_KIND = "EndpointPickerConfig"
EPP_CONFIG_KEY = "epp-config.yaml"  # the key llm-d's own EPP manifests read (--config-file)
EPP_TOP_KEYS = frozenset(
    {"apiVersion", "kind", "featureGates", "plugins", "schedulingProfiles", "dataLayer",
     "flowControl", "requestHandler", "saturationDetector", "parser"}
)  # fmt: skip
EPP_FEATURE_GATES = frozenset({"flowControl", "haPopulateNonLeaderDatastore"})
PREFILL_PROFILE, DECODE_PROFILE = "prefill", "decode"  # the handler's defaults; the prefix
# producer also writes to the profile named "prefill" by name
ALWAYS_DECIDER = "always-disagg-pd-decider"
THRESHOLD_DECIDER = "prefix-based-pd-decider"
PROFILE_HANDLER = "disagg-profile-handler"
# plugin type → the parameter keys its factory decodes strictly; None: the factory ignores
# its parameters (any are accepted, none do anything)
EPP_PLUGINS: dict[str, frozenset[str] | None] = {
    PROFILE_HANDLER: frozenset({"stageOrder", "profiles", "deciders"}),
    ALWAYS_DECIDER: None,
    THRESHOLD_DECIDER: frozenset({"nonCachedTokens", "promptTokens"}),
    "prefill-filter": None,
    "decode-filter": None,
    "encode-filter": None,
    "approx-prefix-cache-producer": frozenset(
        {
            "autoTune",
            "blockSizeTokens",
            "blockSize",
            "maxPrefixBlocksToMatch",
            "maxPrefixTokensToMatch",
            "lruCapacityPerServer",
        }
    ),
    "prefix-cache-scorer": frozenset(
        {"prefixMatchInfoProducerName", "matchLengthWeight", "matchLengthScaleTokens"}
    ),
    "queue-scorer": None,
    "kv-cache-utilization-scorer": None,
    "active-request-scorer": frozenset(
        {"idleThreshold", "maxBusyScore", "requestTimeout", "inFlightLoadProducerName"}
    ),
    "load-aware-scorer": frozenset({"threshold"}),
    "max-score-picker": frozenset({"maxNumOfEndpoints"}),
    "random-picker": frozenset({"maxNumOfEndpoints"}),
    # the precise prefix pipeline (below)
    "token-producer": frozenset({"modelName", "vllm", "estimate", "udsTokenizerConfig"}),
    "precise-prefix-cache-producer": frozenset(
        {
            "tokenProcessorConfig",
            "indexerConfig",
            "kvEventsConfig",
            "speculativeIndexing",
            "speculativeTTL",
        }
    ),
    "endpoint-notification-source": None,  # EndpointSourceFactory ignores its decoder
}

# --- The precise prefix pipeline: the engines' KV events (spec.routing.prefixIndex events) --
# v0.10.0's deploy/config/epp-precise-prefix-cache-config.yaml: a token-producer (vLLM's
# /v1/completions/render and /v1/chat/completions/render; its default ``estimate`` backend
# makes up token ids, which match no engine block), the precise-prefix-cache-producer, and
# the endpoint-notification-source whose extractor (that producer) subscribes to each pool
# endpoint at ``kvEventsConfig.podDiscoveryConfig.socketPort`` + its rank
# (preciseprefixcache/extractor.go, ensureSubscriber). The producer recomputes block keys
# from the events' token_ids (its README, "Engine compatibility"), in blocks of
# ``tokenProcessorConfig.blockSizeTokens``. The vLLM adapter reads the model from the topic
# ``kv@<pod>@<model>`` (pkg/kvevents/engineadapter/vllm_adapter.go); the pool subscribes to
# ``topicFilter``, default ``kv@`` (pkg/kvevents/pool.go, DefaultConfig).
TOKEN_PRODUCER = "token-producer"
PRECISE_PRODUCER = "precise-prefix-cache-producer"
NOTIFICATION_SOURCE = "endpoint-notification-source"
# (plugin type, parameter path) → the keys of that nested object; Go's DisallowUnknownFields
# holds nested structs to their fields too
EPP_NESTED: dict[tuple[str, ...], frozenset[str]] = {
    (TOKEN_PRODUCER, "vllm"): frozenset({"url", "timeout", "mmTimeout"}),
    (PRECISE_PRODUCER, "tokenProcessorConfig"): frozenset(
        {"blockSize", "blockSizeTokens", "hashSeed"}
    ),  # pkg/kvcache/kvblock/token_processor.go
    (PRECISE_PRODUCER, "kvEventsConfig"): frozenset(
        {
            "zmqEndpoint",
            "topicFilter",
            "concurrency",
            "engineType",
            "discoverPods",
            "podDiscoveryConfig",
        }
    ),
    (PRECISE_PRODUCER, "kvEventsConfig", "podDiscoveryConfig"): frozenset(
        {"podLabelSelector", "podNamespace", "socketPort", "replaySocketPort"}
    ),
}
# apix/config/v1alpha1/endpointpickerconfig_types.go, DataLayerConfig
DATA_LAYER_KEYS = frozenset(
    {"injectDefaults", "sources", "discovery", "crossReplicaSyncerPluginRef",
     "crossReplicaSyncInterval"}
)  # fmt: skip
# approx-prefix-cache-producer's floor: GetBlockSize answers at least this many tokens
# whatever the config or the endpoints' metrics say (a configured blockSizeTokens below it
# loads, with a warning, and is overridden: pkg/epp/framework/plugins/requestcontrol/
# dataproducer/approximateprefix/plugin.go, ``minBlockSizeTokens``; llm-d-router #1158).
MIN_BLOCK_SIZE_TOKENS = 64


def prefix_block_tokens(engine_block: int) -> int:
    """The producer's blockSizeTokens for an engine that caches prefixes in blocks of
    ``engine_block`` tokens: the smallest multiple of it at or above the producer's floor,
    so what is rendered is what runs and a match still ends on an engine block."""
    return engine_block * max(1, -(-MIN_BLOCK_SIZE_TOKENS // engine_block))


PROFILE_HANDLERS = frozenset({PROFILE_HANDLER, "single-profile-handler"})
DECIDERS = frozenset({ALWAYS_DECIDER, THRESHOLD_DECIDER})
# keys older configs used that v0.10.0 refuses → what to write instead
RETIRED_PARAMETERS = {
    "threshold": "v0.7.0 removed it; prefix-based-pd-decider takes nonCachedTokens (0 means "
    "never), always-disagg-pd-decider always disaggregates",
    "hashBlockSize": "v0.7.0 removed it; approx-prefix-cache-producer takes blockSizeTokens",
}


def epp_config_problems(doc: Any) -> list[str]:
    """What llm-d-router v0.10.0's loader would refuse in an EndpointPickerConfig (empty:
    it loads), each naming the field."""
    if not isinstance(doc, dict):
        return ["the config must be a mapping"]
    out = [f"{k}: unknown field (strict decoding)" for k in doc if k not in EPP_TOP_KEYS]
    if (doc.get("apiVersion"), doc.get("kind")) != (EPP_API_VERSION, EPP_KIND):
        out.append(f"apiVersion/kind: must be {EPP_API_VERSION} {EPP_KIND}")
    for gate in doc.get("featureGates") or []:
        if str(gate).split("=", 1)[0] not in EPP_FEATURE_GATES:
            out.append(f"featureGates: {gate!r} is unknown or unregistered")
    plugins: dict[str, dict[str, Any]] = {}  # name → spec, as the loader names them
    for i, spec in enumerate(doc.get("plugins") or []):
        out += _plugin_problems(i, spec, plugins)
    out += _profile_problems(doc.get("schedulingProfiles"), plugins)
    handlers = [n for n, p in plugins.items() if p["type"] in PROFILE_HANDLERS]
    single = len(doc.get("schedulingProfiles") or []) == 1  # a handler is added for one
    if len(handlers) > 1 or (not handlers and not single):
        out.append(f"plugins: exactly one profile handler is needed, found {len(handlers)}")
    for name, spec in plugins.items():
        if spec["type"] == PROFILE_HANDLER:
            out += _handler_problems(name, spec.get("parameters") or {}, plugins)
    return out + _data_layer_problems(doc.get("dataLayer"), plugins)


def _nested_problems(where: str, kind: str, params: dict[str, Any]) -> list[str]:
    """Unknown keys in the nested objects of ``kind``'s parameters (:data:`EPP_NESTED`)."""
    out = []
    for path, allowed in EPP_NESTED.items():
        if path[0] != kind:
            continue
        value: Any = params
        for key in path[1:]:
            value = value.get(key) if isinstance(value, dict) else None
        for key in value if isinstance(value, dict) else ():
            if key not in allowed:
                at = ".".join(path[1:])
                out.append(f"{where}.parameters.{at}.{key}: unknown field; {at} takes "
                           f"{', '.join(sorted(allowed))}")  # fmt: skip
    if kind == TOKEN_PRODUCER and "vllm" in params and not params.get("modelName"):
        out.append(f"{where}.parameters.modelName: required with the vllm backend")
    return out


def _data_layer_problems(layer: Any, plugins: dict[str, dict[str, Any]]) -> list[str]:
    if layer is None:
        return []
    if not isinstance(layer, dict):
        return ["dataLayer: must be a mapping"]
    out = [f"dataLayer.{k}: unknown field" for k in layer if k not in DATA_LAYER_KEYS]
    for i, source in enumerate(layer.get("sources") or []):
        where = f"dataLayer.sources[{i}]"
        refs = [(f"{where}.pluginRef", source.get("pluginRef"))]
        refs += [(f"{where}.extractors[{j}].pluginRef", e.get("pluginRef"))
                 for j, e in enumerate(source.get("extractors") or [])]  # fmt: skip
        out += [f"{at}: {ref!r} is not a defined plugin" for at, ref in refs if ref not in plugins]
    return out


def _plugin_problems(i: int, spec: Any, plugins: dict[str, dict[str, Any]]) -> list[str]:
    where = f"plugins[{i}]"
    if not isinstance(spec, dict):
        return [f"{where}: must be a mapping"]
    out = [f"{where}.{k}: unknown field" for k in spec if k not in ("name", "type", "parameters")]
    kind = spec.get("type")
    if not kind:
        return [*out, f"{where}: is missing a type"]
    name = str(spec.get("name") or kind)  # a missing name defaults to the type
    if name in plugins:
        out.append(f"{where}: duplicate plugin name {name!r}")
    plugins[name] = spec
    if kind not in EPP_PLUGINS:
        return [*out, f"{where}: plugin type {kind!r} is not registered (or not checked here)"]
    allowed, params = EPP_PLUGINS[kind], spec.get("parameters")
    if allowed is not None and params is not None:
        if not isinstance(params, dict):
            return [*out, f"{where}.parameters: must be a mapping"]
        for key in params:
            if key not in allowed:
                fix = RETIRED_PARAMETERS.get(key, f"{kind} takes {', '.join(sorted(allowed))}")
                out.append(f"{where}.parameters.{key}: unknown field; {fix}")
        out += _nested_problems(where, kind, params)
        for key in ("nonCachedTokens", "promptTokens", "blockSizeTokens"):
            value = params.get(key)
            if value is not None and (not isinstance(value, int) or value < 0):
                out.append(f"{where}.parameters.{key}: must be an integer >= 0")
    return out


def _profile_problems(profiles: Any, plugins: dict[str, dict[str, Any]]) -> list[str]:
    if not isinstance(profiles, list) or not profiles:
        return ["schedulingProfiles: at least one profile is required"]
    out, seen = [], set()
    for i, profile in enumerate(profiles):
        where = f"schedulingProfiles[{i}]"
        if not isinstance(profile, dict) or not profile.get("name"):
            out.append(f"{where}: a profile needs a name")
            continue
        if profile["name"] in seen:
            out.append(f"{where}: duplicate profile name {profile['name']!r}")
        seen.add(profile["name"])
        for j, ref in enumerate(profile.get("plugins") or []):
            name = ref.get("pluginRef") if isinstance(ref, dict) else None
            if name not in plugins:
                out.append(f"{where}.plugins[{j}].pluginRef: {name!r} is not a defined plugin")
            weight = ref.get("weight") if isinstance(ref, dict) else None
            if weight is not None and not isinstance(weight, (int, float)):
                out.append(f"{where}.plugins[{j}].weight: must be a number")
    return out


def _handler_problems(
    name: str, params: dict[str, Any], plugins: dict[str, dict[str, Any]]
) -> list[str]:
    out = []
    deciders = params.get("deciders") or {}
    for stage, ref in deciders.items() if isinstance(deciders, dict) else ():
        if stage not in ("prefill", "encode"):
            out.append(f"{name}.parameters.deciders.{stage}: unknown field")
        elif ref not in plugins:
            out.append(f"{name}.parameters.deciders.{stage}: plugin {ref!r} not found")
        elif plugins[ref]["type"] not in DECIDERS:
            out.append(f"{name}.parameters.deciders.{stage}: {ref!r} is not a decider")
    order = str(params.get("stageOrder", "")).lower().replace("-", "").replace("_", "")
    if order not in ("", "decodefirst", "decode", "prefillfirst", "prefill"):
        out.append(f"{name}.parameters.stageOrder: must be decode-first or prefill-first")
    return out
