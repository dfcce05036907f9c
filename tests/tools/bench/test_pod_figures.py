"""`disagg bench pods`'s figures from a fake run whose answer is known: the READ read off the
decode workers' real metrics text, its rate, its share of the iperf3 limits, the TTFT ratio;
the variants' manifests rendered by the operator's own code; iperf3's report read."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from disagg_tools.bench import iperf, pods
from disagg_tools.bench import pod_figures as figures
from disagg_tools.local.stack import load, render_manifest
from disagg_worker.transfer.telemetry import TransferTelemetry
from tests.operator.builders import by_kind, env_of

MIB4 = 4 << 20


def _metrics(*reads: tuple[int, float, float], pushed: int = 0) -> str:
    """A decode worker's /metrics after ``reads`` of (bytes, post ms, wire ms), the last
    ``pushed`` of them pushes."""
    telemetry = TransferTelemetry()
    for n, (nbytes, post, wire) in enumerate(reads):
        push = n >= len(reads) - pushed
        telemetry.record_transfer(
            nbytes=nbytes, descriptors=2, post_ms=post, transfer_ms=wire, pushed=push
        )
    return telemetry.metrics_text().decode()


def test_a_requests_read_is_the_counters_difference_around_it() -> None:
    before = figures.counters([_metrics((1 << 20, 0.5, 2.0))])
    after = figures.counters([_metrics((1 << 20, 0.5, 2.0), (MIB4, 1.0, 3.0))])
    s = figures.sample(100.0, 400.0, before, after)
    assert (s.transfers, s.kv_bytes) == (1, MIB4)
    assert s.post_ms == pytest.approx(1.0) and s.wire_ms == pytest.approx(3.0)
    assert s.read_gbps == pytest.approx(MIB4 / 4e-3 / 1e9)  # posted to done: 4 ms


def test_two_decode_workers_counters_add_up() -> None:
    both = figures.counters([_metrics((100, 1.0, 1.0)), _metrics((50, 1.0, 2.0))])
    assert both == {
        "transfers": 2, "kv_bytes": 150, "post_ms": 2.0, "wire_ms": 3.0, "pushed": 0
    }  # fmt: skip


def test_a_pushed_request_is_counted_as_one() -> None:
    before = figures.counters([_metrics((1 << 20, 0.5, 2.0))])
    after = figures.counters([_metrics((1 << 20, 0.5, 2.0), (MIB4, 1.0, 3.0), pushed=1)])
    pushed = figures.sample(100.0, 400.0, before, after)
    one_read = {k: v + 1 for k, v in before.items() if k != "pushed"}
    read = figures.sample(100.0, 400.0, before, before | one_read)
    assert pushed.pushed == 1 and read.pushed == 0
    case = figures.case([pushed, read, read], None)
    assert (case["pushed"], case["unattributed"]) == (1, 0)


def _sample(ttft: float, reads: int = 1, wire_ms: float = 3.0) -> figures.Sample:
    return figures.Sample(ttft, ttft + 50, reads, MIB4 * reads, 1.0 * reads, wire_ms * reads)


def test_a_request_with_other_than_one_read_gives_no_rate() -> None:
    samples = [_sample(10.0), _sample(20.0, reads=2), _sample(30.0, reads=0)]
    case = figures.case(samples, None)
    assert case["unattributed"] == 2 and case["requests"] == 3
    assert case["nixl_gbps"] == pytest.approx(MIB4 / 4e-3 / 1e9, abs=1e-3)
    assert case["ttft_ms"]["median"] == 20.0  # every request's TTFT counts
    assert "nixl_vs_iperf3_single" not in case


def test_nixls_share_of_each_limit() -> None:
    # reads of 4 MiB in 1 + 3 ms and 1 + 7 ms: median rate (1.049 + 0.524) / 2 GB/s
    samples = [_sample(10.0, wire_ms=3.0), _sample(10.0, wire_ms=7.0)]
    limits = {"single_gbps": 1.0, "multi_gbps": 2.0}
    case = figures.case(samples, limits)
    rate = (MIB4 / 4e-3 + MIB4 / 8e-3) / 2 / 1e9
    assert case["nixl_gbps"] == pytest.approx(rate, abs=1e-3)
    assert case["nixl_vs_iperf3_single"] == pytest.approx(rate, abs=2e-3)
    assert case["nixl_vs_iperf3_multi"] == pytest.approx(rate / 2, abs=2e-3)


def test_the_limits_over_rounds_are_medians() -> None:
    rounds = [
        {"single_gbps": g, "multi_gbps": 2 * g, "streams": 4, "seconds": 1.0}
        for g in (1.0, 3.0, 2.0)
    ]
    got = figures.limits(rounds)
    assert (got["single_gbps"], got["multi_gbps"], got["rounds"]) == (2.0, 4.0, 3)
    assert got["single_spread"] == {"median": 2.0, "p10": 1.0, "p90": 3.0}


def test_each_run_of_pods_is_set_against_the_processes_ttft() -> None:
    samples = {
        figures.PROCESS: {512: [_sample(100.0)]},
        figures.PODS: {512: [_sample(150.0)]},
        "podman:big": {512: [_sample(120.0)]},
    }
    limits = {figures.PODS: {"single_gbps": 1.0, "multi_gbps": 1.0}}
    row = figures.by_prompt(samples, limits)[512]
    assert row["ttft_ratio"] == row[figures.PODS]["ttft_vs_process"] == 1.5
    assert row["podman:big"]["ttft_vs_process"] == 1.2
    assert "nixl_vs_iperf3_single" in row[figures.PODS]
    assert "nixl_vs_iperf3_single" not in row["podman:big"]  # no limits measured for it
    assert "ttft_vs_process" not in row[figures.PROCESS]


def test_iperf3s_report_gives_what_the_receiver_got() -> None:
    report = {
        "end": {"sum_sent": {"bits_per_second": 9e9}, "sum_received": {"bits_per_second": 8e9}}
    }
    assert iperf.gbps_of(report) == 1.0
    with pytest.raises(iperf.IperfError, match="unable to connect"):
        iperf.gbps_of({"error": "unable to connect to server"})


def test_a_variant_names_its_run_and_ucx_env() -> None:
    assert pods.parse_variant("seg1m:UCX_TCP_TX_SEG_SIZE=1m,UCX_TCP_RX_SEG_SIZE=1m") == (
        "seg1m",
        {"UCX_TCP_TX_SEG_SIZE": "1m", "UCX_TCP_RX_SEG_SIZE": "1m"},
    )
    assert pods.parse_variant("push:DISAGG_TRANSFER_MODE=push") == (
        "push",
        {"DISAGG_TRANSFER_MODE": "push"},
    )
    for bad in (
        "seg1m",
        "Seg:UCX_A=1",
        "x:PATH=/bin",
        "x:DISAGG_ROLE=decode",
        "x:UCX_A",
        "a-very-long-variant-name:UCX_A=1",
    ):
        with pytest.raises(argparse.ArgumentTypeError):
            pods.parse_variant(bad)


def test_a_variants_pods_carry_its_env_over_the_derived_one(tmp_path: Path) -> None:
    env = {"UCX_TCP_TX_SEG_SIZE": "1m", "UCX_TCP_RX_SEG_SIZE": "1m", "UCX_TCP_MAX_POLL": "-1"}
    path = pods.variant_manifest(pods.QUICKSTART, "big", env, tmp_path)
    objects, _ = render_manifest(load(str(path)), "k" * 64)
    rendered = by_kind(objects, "Pod")
    assert {p["metadata"]["name"] for p in rendered} == {
        "quickstart-big-prefill-0",
        "quickstart-big-decode-0",
    }
    for pod in rendered:
        engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
        got = env_of(engine)
        assert {k: got[k] for k in env} == env
        assert [e["name"] for e in engine["env"]].count("UCX_TCP_TX_SEG_SIZE") == 1
        assert "DISAGG_TRANSFER_MODE" not in got  # decode READs unless told otherwise


def test_a_push_variants_pods_push(tmp_path: Path) -> None:
    env = {"DISAGG_TRANSFER_MODE": "push"}
    path = pods.variant_manifest(pods.QUICKSTART, "push", env, tmp_path)
    objects, _ = render_manifest(load(str(path)), "k" * 64)
    for pod in by_kind(objects, "Pod"):
        engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
        assert [e for e in engine["env"] if e["name"] == "DISAGG_TRANSFER_MODE"] == [
            {"name": "DISAGG_TRANSFER_MODE", "value": "push"}
        ]
