"""The proxy's settings value: ``disagg proxy``'s flags reach it, and the proxy runs by it
(the deadline of its hops, its routing policy, its retries, its protocol, how its own
pools pick)."""

from __future__ import annotations

import pytest

from disagg_worker.serve.pd.kv_transfer_params import (
    KV_TRANSFER_PARAMS,
    KvTransferParamsProtocol,
)
from disagg_worker.serve.proxy import app
from disagg_worker.serve.proxy.config import ProxyConfig, from_args
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.rules.routing import Policy

# a protocol instance other than the default, named on the command line as MODULE:ATTR
OTHER = KvTransferParamsProtocol()
POOLS = ["--prefill", "http://p:8000", "--decode", "http://d:8000"]


def test_each_flag_reaches_its_field() -> None:
    args = app._parser().parse_args(
        [*POOLS, "--policy", "round-robin", "--timeout-s", "7.5", "--prefill-retries", "0",
         "--disaggregate", "threshold", "--threshold-tokens", "100",
         "--prefill-queue-limit", "3", "--decode-prefix-cache", "--block-tokens", "32",
         "--pd-protocol", f"{__name__}:OTHER"]
    )  # fmt: skip
    config = from_args(args)
    assert config == ProxyConfig(
        policy="round-robin",
        timeout_s=7.5,
        prefill_retries=0,
        routing=Policy("threshold", 100, 3, prefix_cache=True, block_tokens=32),
        protocol=OTHER,
    )
    assert config.protocol is OTHER


def test_the_command_lines_defaults() -> None:
    config = from_args(app._parser().parse_args(POOLS))
    assert (config.policy, config.timeout_s, config.prefill_retries) == ("least-loaded", 60.0, 1)
    assert config.routing == Policy()
    assert config.protocol is KV_TRANSFER_PARAMS


def test_a_routing_value_the_policy_refuses_exits_naming_the_flag() -> None:
    with pytest.raises(SystemExit, match=r"^disagg proxy: --threshold-tokens: must be 0 or"):
        app.main([*POOLS, "--threshold-tokens", "-1"])
    with pytest.raises(ValueError, match=r"--block-tokens"):
        from_args(app._parser().parse_args([*POOLS, "--block-tokens", "0"]))


def test_the_proxy_runs_by_its_config() -> None:
    routing = Policy(mode="threshold", threshold_tokens=8)
    config = ProxyConfig("least-loaded", 3.0, 2, routing, OTHER)
    proxy = Proxy(["http://p1", "http://p2"], ["http://d"], config)
    assert proxy.config is config
    assert (proxy.http.timeout_s, proxy.config.prefill_retries) == (3.0, 2)
    assert proxy.planner.policy is routing and proxy.config.protocol is OTHER
    (pair,) = proxy.pairs.pairs
    assert proxy.pairs.policy == pair.prefill.policy == pair.decode.policy == "least-loaded"
    assert [b.url for b in pair.prefill.backends] == ["http://p1", "http://p2"]
