"""`disagg bench flood`'s figures from records (tools/disagg_tools/bench/rules/flood_figures.py):
what the clients got, when the canary passed after the flood's end, how long an engine
stayed busy after the last answer, and each target's verdict."""

from __future__ import annotations

from disagg_tools.bench.rules import flood_figures as ff

END = 100.0


def test_client_figures_split_shed_503s_from_the_workers_and_time_the_last_answer() -> None:
    answers = [
        ff.Answer(0.0, 5.0, 200),
        ff.Answer(1.0, 1.01, 503, shed=True),
        ff.Answer(2.0, 2.5, 503),  # a worker's full KV cache, passed on
        ff.Answer(3.0, 63.0, 504),
        ff.Answer(90.0, END + 12.5, 200),
        ff.Answer(95.0, 99.0, ff.NO_ANSWER),
    ]
    got = ff.client_figures(answers, END)
    assert got == {
        "requests": 6,
        "answered": 2,
        "shed_503": 1,
        "other_503": 1,
        "timed_out_504": 1,
        "other_failed": 1,
        "statuses": {"no_answer": 1, "200": 2, "503": 2, "504": 1},
        "last_answer_after_end_s": 12.5,
    }


def test_the_canary_counts_its_busy_failures_in_the_flood_and_its_first_pass_after() -> None:
    runs = [
        ff.CanaryRun(10.0, 11.0, None),  # before the flood bit: passes, not counted after
        ff.CanaryRun(80.0, 95.0, "PrefillBusy: prefill http://p: no answer within 15s"),
        ff.CanaryRun(95.0, 110.0, "PrefillBusy: prefill http://p: no answer within 15s"),
        ff.CanaryRun(110.0, END + 14.0, None),
        ff.CanaryRun(121.0, END + 21.1, None),
    ]
    assert ff.canary_figures(runs, END) == {
        "canary_busy_during_flood": 2,
        "canary_pass_after_end_s": 14.0,
    }
    assert ff.canary_figures(runs[:3], END)["canary_pass_after_end_s"] is None


def test_busy_after_is_the_first_idle_sample_from_then_on() -> None:
    samples = [(9.0, False), (10.2, True), (10.4, True), (10.6, False), (10.8, False)]
    assert ff.busy_after(samples, 10.0) == 0.6
    assert ff.busy_after(samples[:3], 10.0) is None


def test_targets_and_the_table() -> None:
    figures = {key: None for key in ff.KEYS} | {
        "answered": 40,
        "canary_pass_after_end_s": 31.0,
        "prefill_busy_after_last_answer_s": 0.4,
        "cancelled": {"prefill kind=prefill,stage=queued": 3},
        "cancel_stop_ms_mean": ff.stop_ms_mean(1.5, 3),
    }
    assert ff.met(figures) == {
        "canary_pass_after_end_s": False,
        "prefill_busy_after_last_answer_s": True,
        "decode_busy_after_last_answer_s": None,
    }
    rows = {row["figure"]: row for row in ff.report_rows(figures)}
    assert rows["canary_pass_after_end_s"]["met"] == "MISSED"
    assert rows["cancel_stop_ms_mean"]["value"] == "500"
    assert "cancelled" not in rows
    assert ff.report_counts(figures) == ["cancelled: prefill kind=prefill,stage=queued 3"]
