"""An engine whose tensor-parallel ranks span the pods of a group (a LeaderWorkerSet's
leader and worker), with real rank processes, gloo and NIXL: the first "pod" serves and
runs rank 0, the other runs rank 1 and serves nothing. The second pod's rank listens only
on its own address (127.0.0.2, another loopback address standing for another pod's IP), so
a decode that read it at rank 0's address would fail: P/D equals aggregated TP 1 token for
token only if the prefill published where each rank lives and the decode read it there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from disagg_tools.local.children import (
    Child,
    disagg_argv,
    free_port_range,
    loopback_group_env,
    start_child,
)
from tests.worker.serve.conftest import Workers, get, post, wait_until
from tests.worker.serve.test_tensor_parallel import _bodies, _pd

OTHER_POD = "127.0.0.2"


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workers]:
    workers = Workers(tmp_path_factory.mktemp("group"))
    try:
        yield workers
    finally:
        workers.stop()


def _spanning(workers: Workers, role: str, name: str, tp: int) -> tuple[Child, Child]:
    """The two pods of one engine of ``tp`` ranks: the leader (rank 0 ..), then the other."""
    port = free_port_range(tp + 2)
    common = {"tp_size": tp, "nodes": 2, "group_port": port}
    leader = workers.spawn(role, name, node_rank=0, advertise_host="127.0.0.1", **common)
    env = {
        **workers._base,
        **loopback_group_env(2, 1, port),
        "DISAGG_TP_SIZE": str(tp),
        "DISAGG_ROLE": role,
        "DISAGG_ENGINE_ID": f"{name}-1",  # its own pod name: the engine is rank 0's
        "DISAGG_SIDE_CHANNEL_PORT": "0",
    }
    assert env["DISAGG_SIDE_CHANNEL_HOST"] == OTHER_POD  # its rank listens there alone
    other = start_child(f"{name}-1", disagg_argv("worker", "serve"), env, workers.log_dir)
    workers.children.append(other)
    return leader, other


@pytest.fixture(scope="module")
def aggregated(group: Workers) -> list[list[int]]:
    agg = group.worker("both", "agg-tp1")
    outs = [post(agg.url + "/v1/completions", b)[1] for b in _bodies()]
    group.stop_one(agg)
    return [o["choices"][0]["token_ids"] for o in outs]


@pytest.mark.parametrize("spanning", ["prefill", "decode"])
def test_pd_with_an_engine_across_two_pods_equals_aggregated_tp1(
    group: Workers, aggregated: list[list[int]], spanning: str
) -> None:
    others: dict[str, Any] = {}
    if spanning == "prefill":
        pre, other = _spanning(group, "prefill", "pre-g", 2)
        dec = group.spawn("decode", "dec-1")
    else:
        pre = group.spawn("prefill", "pre-1", tp_size=2)
        dec, other = _spanning(group, "decode", "dec-g", 2)
    others[spanning] = other
    group.ready(pre, dec)
    try:
        for body, want in zip(_bodies(), aggregated, strict=True):
            out = _pd(pre, dec, body)
            assert out["choices"][0]["token_ids"] == want, len(body["prompt"])
            assert out["disagg"]["kv_source"] == "transferred"
        wait_until(lambda: get(pre.url + "/debug/blocks")["used"] == 0, 20, "prefill release")
        assert other.proc.poll() is None  # the other pod's rank still serves the engine
    finally:
        for child in (pre, dec, other):
            group.stop_one(child)
    assert other.proc.returncode is not None
