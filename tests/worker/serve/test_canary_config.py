"""The canary's settings value: ``disagg worker canary``'s flags reach it, and the canary
runs by it (its two hops through a proxy with its deadline and protocol)."""

from __future__ import annotations

from disagg_worker.serve.canary import Canary, parser
from disagg_worker.serve.canary_config import UNTRACED, CanaryConfig, from_args
from disagg_worker.serve.pd.kv_transfer_params import (
    KV_TRANSFER_PARAMS,
    KvTransferParamsProtocol,
)
from disagg_worker.serve.proxy.config import ProxyConfig

# a protocol instance other than the default, named on the command line as MODULE:ATTR
OTHER = KvTransferParamsProtocol()
REQUIRED = ["--prefill", "http://p:8000/", "--decode", "http://127.0.0.1:8000//", "--model", "m"]


def test_each_flag_reaches_its_field() -> None:
    args = parser().parse_args(
        [*REQUIRED, "--timeout-s", "4", "--interval-s", "2", "--fresh-s", "9",
         "--min-bandwidth-gbps", "1.5", "--pd-protocol", f"{__name__}:OTHER"]
    )  # fmt: skip
    config = from_args(args)
    # URLs lose their trailing slashes: the canary appends its paths to them
    assert config == CanaryConfig(
        "http://p:8000", "http://127.0.0.1:8000", "m", 4.0, 2.0, 9.0, 1.5, OTHER
    )
    assert config.protocol is OTHER


def test_the_command_lines_defaults() -> None:
    config = from_args(parser().parse_args(REQUIRED))
    assert (config.timeout_s, config.interval_s, config.fresh_s) == (15.0, 7.0, 45.0)
    assert config.min_gbps is None and config.protocol is KV_TRANSFER_PARAMS


def test_the_canary_runs_by_its_config() -> None:
    config = CanaryConfig("http://p", "http://d", "m", 4.0, 2.0, 9.0, protocol=OTHER)
    canary = Canary(config, clock=lambda: 100.0)
    assert canary.config is config and canary.clock() == 100.0
    # its hops' traces are unsampled: no worker records a span of a canary
    assert config.proxy() == ProxyConfig(timeout_s=4.0, protocol=OTHER, tracing=UNTRACED)
    assert UNTRACED.ratio == 0.0
    # its hops: one prefill, this pod's decode, the canary's deadline and protocol
    assert canary.proxy.config == config.proxy()
    (pair,) = canary.proxy.pairs.pairs
    assert [b.url for b in pair.prefill.backends] == ["http://p"]
    assert [b.url for b in pair.decode.backends] == ["http://d"]
    assert canary.proxy.http.timeout_s == 4.0 and canary.proxy.config.protocol is OTHER
