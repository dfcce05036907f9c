"""vLLM's "KV Transfer metrics" log lines → figures, added up over intervals."""

from __future__ import annotations

import pytest

from disagg_tools.vllm.rules import metrics

LINE = (
    "(APIServer pid=18835) INFO 12-01 05:35:21 [metrics.py:103] KV Transfer metrics: "
    "Num successful transfers={n}, Avg xfer time (ms)={ms}, P90 xfer time (ms)={p90}, "
    "Avg post time (ms)={ms}, P90 post time (ms)={p90}, Avg MB per transfer={mb}, "
    "Throughput (MB/s)=502.26, Avg number of descriptors={d}, Num failed transfers={f}, "
    "Num KV expired reqs=0, Num notifs after expiry=0"
)


def test_parse_line_reads_every_field() -> None:
    figures = metrics.parse_line(LINE.format(n=8, ms=0.249, p90=0.46, mb=0.125, d=4.0, f=0))
    assert figures is not None
    assert figures["Num successful transfers"] == 8
    assert figures["Avg xfer time (ms)"] == pytest.approx(0.249)
    assert figures["Avg MB per transfer"] == pytest.approx(0.125)
    assert figures["Throughput (MB/s)"] == pytest.approx(502.26)
    assert len(figures) == 11


def test_other_lines_are_not_figures() -> None:
    assert metrics.parse_line("INFO 12-01 [loggers.py:1] Avg prompt throughput: 1.0") is None


def test_summarize_weights_averages_by_transfers() -> None:
    lines = [
        LINE.format(n=3, ms=1.0, p90=1.5, mb=0.1, d=4, f=0),
        "unrelated",
        LINE.format(n=1, ms=5.0, p90=5.0, mb=0.5, d=8, f=2),
        LINE.format(n=0, ms=0, p90=0, mb=0, d=0, f=0),
    ]
    s = metrics.summarize(lines)
    assert s["Num successful transfers"] == 4
    assert s["Num failed transfers"] == 2
    assert s["Avg xfer time (ms)"] == pytest.approx((3 * 1.0 + 5.0) / 4)
    assert s["Avg MB per transfer"] == pytest.approx((0.3 + 0.5) / 4)
    assert s["Avg number of descriptors"] == pytest.approx(5.0)
    assert s["Max P90 xfer time (ms)"] == 5.0


def test_summarize_of_nothing_is_zero() -> None:
    s = metrics.summarize([])
    assert s["Num successful transfers"] == 0 and s["Avg xfer time (ms)"] == 0


# The request-phase histograms as vLLM's /metrics page writes them (two engines' label sets).
PAGE = """# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase.
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_sum{{engine="0",model_name="m"}} {q0}
vllm:request_queue_time_seconds_bucket{{engine="0",le="0.3",model_name="m"}} {n}
vllm:request_queue_time_seconds_count{{engine="0",model_name="m"}} {n}
vllm:request_queue_time_seconds_sum{{engine="1",model_name="m"}} {q1}
vllm:request_queue_time_seconds_count{{engine="1",model_name="m"}} 1.0
vllm:request_prefill_time_seconds_sum{{engine="0",model_name="m"}} {p}
vllm:request_prefill_time_seconds_count{{engine="0",model_name="m"}} {n}
vllm:request_prefill_time_seconds_created{{engine="0",model_name="m"}} 1.7e9
vllm:request_decode_time_seconds_sum{{engine="0",model_name="m"}} 99.0
"""


def test_request_phases_are_read_from_the_metrics_page() -> None:
    before = metrics.histograms(PAGE.format(q0=0.5, q1=0.5, p=1.0, n=10.0))
    after = metrics.histograms(PAGE.format(q0=0.56, q1=0.5, p=1.04, n=14.0))
    assert before[metrics.QUEUE_TIME] == (1.0, 11.0)  # both engines' label sets
    assert metrics.mean_ms(before, after, metrics.QUEUE_TIME) == pytest.approx(15.0)
    assert metrics.mean_ms(before, after, metrics.PREFILL_TIME) == pytest.approx(10.0)
    assert metrics.mean_ms(before, before, metrics.PREFILL_TIME) is None  # no request between
    assert metrics.histograms("") == dict.fromkeys(metrics.PHASES, (0.0, 0.0))


def test_a_counter_is_summed_over_label_sets_with_or_without_its_total_suffix() -> None:
    page = (
        "# TYPE vllm:nixl_num_failed_transfers counter\n"
        'vllm:nixl_num_failed_transfers_total{engine="0"} 2.0\n'
        'vllm:nixl_num_failed_transfers_total{engine="1"} 1.0\n'
        'vllm:nixl_num_failed_transfers_created{engine="0"} 1.7e9\n'
        "vllm:other_total 5.0\n"
    )
    assert metrics.counter(page, "vllm:nixl_num_failed_transfers") == 3.0
    assert metrics.counter("plain 4\n", "plain") == 4.0
    assert metrics.counter(page, "vllm:absent") == 0.0
