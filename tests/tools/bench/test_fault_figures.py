"""`disagg bench faults`: figures from client records, targets, request bodies and the
hostile side-channel frames, without starting a process."""

from __future__ import annotations

import random

import pytest

from disagg_tools.bench.faults import main
from disagg_tools.bench.rules import fault_figures as ff
from disagg_tools.bench.rules.fault_figures import NO_ANSWER, Record
from disagg_tools.bench.rules.fault_requests import MAX_TOKENS, ghost_completion, prompt
from disagg_tools.bench.rules.hostile_frames import KINDS, TRANSPORT_SLACK, HostileFrames
from disagg_worker.model.model import BOS
from disagg_worker.transfer.rules.protocol import (
    MAX_FRAME_BYTES,
    AuthError,
    Claim,
    Codec,
    FrameError,
    ProtocolError,
)

SECRET = b"the run's secret"


def rec(start: float, end: float, status: int = 200) -> Record:
    return Record(start, end, status)


def test_percentile_is_a_measured_value_by_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert ff.percentile(values, 99) == 99.0
    assert ff.percentile(values, 50) == 50.0
    assert ff.percentile(values, 100) == 100.0
    assert ff.percentile([7.0], 99) == 7.0
    assert ff.percentile([], 99) == 0.0


def test_latency_counts_only_answered_requests_and_statuses_are_counted() -> None:
    records = [rec(0, 0.010), rec(0, 0.020), rec(0, 9.0, 502), rec(0, 0.001, NO_ANSWER)]
    assert ff.latency_p(records, 99) == 20.0  # the 9 s failure is a failure, not a latency
    assert ff.failed(records) == 2
    assert ff.status_counts(records) == {"no_answer": 1, "200": 2, "502": 1}


def test_load_figures_rate_over_the_span_of_the_requests() -> None:
    records = [rec(10.0, 10.5), rec(10.2, 11.0), rec(11.0, 12.0, 503)]
    f = ff.load_figures(records, clients=3)
    assert f["load_clients"] == 3 and f["load_requests"] == 3 and f["load_failed"] == 1
    assert f["load_statuses"] == {"200": 2, "503": 1}
    assert f["load_rps"] == 1.0  # two answered in the 2 s from the first sent to the last end
    assert f["load_p50_ms"] == 500.0 and f["load_p99_ms"] == 800.0
    assert ff.load_figures([], clients=1)["load_rps"] == 0.0


@pytest.mark.parametrize(
    ("start", "end", "window"),
    [
        (0.0, 0.9, "before"),  # answered before the kill
        (0.5, 1.5, "down"),  # in flight at the kill
        (1.0, 1.1, "down"),  # sent at the kill
        (2.9, 3.5, "down"),  # sent while it was down, answered after it was ready
        (3.0, 3.1, "after"),  # sent the moment it was ready
        (4.0, 4.2, "after"),
    ],
)
def test_restart_windows(start: float, end: float, window: str) -> None:
    assert ff.restart_window(rec(start, end), kill_at=1.0, ready_at=3.0) == window


def test_restart_figures_count_failures_per_window() -> None:
    records = [
        rec(0.0, 0.5),
        rec(0.5, 1.5, 502),
        rec(2.0, 2.1, 502),
        rec(2.5, 3.2),
        rec(3.5, 3.6),
        rec(3.7, 3.8, 502),
    ]
    f = ff.restart_figures(records, kill_at=1.0, ready_at=3.0)
    assert f["prefill_restart_ready_s"] == 2.0
    assert f["prefill_restart_requests"] == {"before": 1, "down": 3, "after": 2}
    assert f["prefill_restart_down_failed"] == 2
    assert f["prefill_restart_failed"] == 1
    assert f["prefill_restart_before_failed"] == 0


def good() -> dict[str, object]:
    return {
        "load_failed": 0,
        "baseline_failed": 0,
        "bad_peer_healthy_failed": 0,
        "prefill_restart_before_failed": 0,
        "baseline_p99_ms": 100.0,
        "bad_peer_healthy_p99_ms": 200.0,
        "prefill_restart_failed": 0,
        "release_after_decode_fail_s": 1.0,
        "fuzz_rss_growth_mb": 16.0,
        "prefill_kill_inflight": 1,
        "prefill_kill_client_failed": 0,
    }


def test_every_target_met_at_its_bound() -> None:
    assert ff.met(good()) == dict.fromkeys(ff.TARGETS, True)
    assert set(ff.TARGETS) <= set(ff.KEYS)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("load_failed", 1),
        ("baseline_failed", 1),
        ("bad_peer_healthy_failed", 2),
        ("prefill_restart_before_failed", 1),
        ("bad_peer_healthy_p99_ms", 200.1),
        ("prefill_restart_failed", 3),
        ("release_after_decode_fail_s", 30.0),
        ("fuzz_rss_growth_mb", 16.1),
        ("prefill_kill_client_failed", 1),
    ],
)
def test_a_figure_past_its_bound_misses_only_its_target(key: str, value: object) -> None:
    verdicts = ff.met({**good(), key: value})
    assert verdicts[key] is False
    assert all(v for k, v in verdicts.items() if k != key)


def test_a_target_whose_figures_were_not_measured_is_neither_met_nor_missed() -> None:
    figures = {**good(), "baseline_p99_ms": None, "fuzz_rss_growth_mb": None}
    verdicts = ff.met(figures)
    assert verdicts["bad_peer_healthy_p99_ms"] is None and verdicts["fuzz_rss_growth_mb"] is None
    assert verdicts["load_failed"] is True


def test_report_rows_show_measured_figures_and_unrun_targets() -> None:
    figures = {**dict.fromkeys(ff.KEYS), "load_failed": 2, "load_statuses": {"200": 5, "502": 2}}
    rows = {r["figure"]: r for r in ff.report_rows(figures)}
    missed = {"figure": "load_failed", "value": "2", "target": "0", "met": "MISSED"}
    assert rows["load_failed"] == missed
    assert rows["fuzz_rss_growth_mb"]["met"] == "not run"
    assert "load_statuses" not in rows and "load_p99_ms" not in rows  # a count; not measured
    assert ff.report_counts(figures) == ["load_statuses: 200 5, 502 2"]


def test_prompts_are_bos_then_bytes_within_the_bounds() -> None:
    rng = random.Random(1)
    lengths = set()
    for _ in range(200):
        p = prompt(rng, 16, 20)
        lengths.add(len(p))
        assert p[0] == BOS and all(0 <= t < 256 for t in p[1:])
    assert lengths == {16, 17, 18, 19, 20}
    assert prompt(random.Random(3), 16, 1024) == prompt(random.Random(3), 16, 1024)


@pytest.mark.parametrize(("tokens", "blocks"), [(16, 1), (17, 2), (64, 4), (65, 5)])
def test_ghost_requests_name_as_many_blocks_as_the_prompt_fills(tokens: int, blocks: int) -> None:
    body = ghost_completion([BOS] * tokens, port=4242, i=7, block_size=16)
    params = body["kv_transfer_params"]
    assert params["remote_block_ids"] == list(range(blocks))
    assert params["do_remote_prefill"] is True
    assert (params["remote_host"], params["remote_port"]) == ("127.0.0.1", 4242)
    assert params["remote_request_id"] == "ghost-7"
    assert body["max_tokens"] == MAX_TOKENS and body["ignore_eos"] is True


def refused_as(codec: Codec, frame: bytes) -> type[ProtocolError] | Claim | None:
    try:
        msg = codec.decode(frame)
    except ProtocolError as e:
        return type(e)
    return msg if isinstance(msg, Claim) else None


@pytest.mark.parametrize(
    ("kind", "defence"),
    [
        ("random", FrameError),
        ("truncated", FrameError),
        ("wrong_hmac", AuthError),
        ("over_limit", FrameError),
    ],
)
def test_each_kind_reaches_the_defence_it_aims_at(kind: str, defence: type) -> None:
    frames, codec = HostileFrames(random.Random(2), SECRET), Codec(SECRET)
    for _ in range(20):
        assert refused_as(codec, frames.frame(kind)) is defence


def test_signed_claims_pass_the_hmac_near_and_over_the_limit() -> None:
    frames, codec = HostileFrames(random.Random(4), SECRET), Codec(SECRET)
    for _ in range(3):
        near = frames.frame("near_limit")
        assert MAX_FRAME_BYTES - 4096 - 5 < len(near) <= MAX_FRAME_BYTES
        # more ids than a claim may name: refused from the array header, ids unread
        assert refused_as(codec, near) is FrameError
        over = frames.frame("over_limit")
        assert MAX_FRAME_BYTES < len(over) <= MAX_FRAME_BYTES + TRANSPORT_SLACK
        beyond = frames.frame("over_transport")
        assert len(beyond) > MAX_FRAME_BYTES + TRANSPORT_SLACK
    for size in (4096, 100_000, MAX_FRAME_BYTES):
        assert size - 5 < len(frames.claim_of_size(size)) <= size


def test_long_claims_are_signed_claims_or_refused_for_a_negative_id() -> None:
    frames, codec = HostileFrames(random.Random(5), SECRET), Codec(SECRET)
    outcomes = [refused_as(codec, frames.frame("long_claim")) for _ in range(24)]
    claims = [o for o in outcomes if isinstance(o, Claim)]
    assert claims and all(1000 <= len(c.block_ids) <= 50_000 for c in claims)
    assert {o for o in outcomes if not isinstance(o, Claim)} == {FrameError}


def test_a_flood_is_seeded_and_mixes_every_kind() -> None:
    def kinds(seed: int) -> list[str]:
        return [k for k, _ in HostileFrames(random.Random(seed), None).frames(300)]

    assert kinds(6) == kinds(6)
    assert set(kinds(6)) == set(KINDS)
    with pytest.raises(ValueError, match="unknown hostile frame kind"):
        HostileFrames(random.Random(0), None).frame("polite")


def test_only_names_known_phases(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--only", "load,nope"])
    assert exc.value.code == 2
    assert "--only: nope: phases are load,bad-peer,restart,release,fuzz" in capsys.readouterr().err


def test_prefill_kill_counts_only_with_requests_in_flight_on_the_victim() -> None:
    """The phase proves the retries only when the killed prefill had work when it died:
    with none in flight, 0 client failures meets nothing."""
    records = [rec(0, 1), rec(0, 2), rec(1, 3, 502)]
    health = {
        "prefill_retries": 2,
        "hop_failovers": {"prefill": {"unreachable": 5, "full": 1}, "decode": {}},
    }
    f = ff.prefill_kill_figures(records, inflight=3, health=health)
    assert f == {
        "prefill_kill_requests": 3,
        "prefill_kill_inflight": 3,
        "prefill_kill_client_failed": 1,
        "prefill_kill_statuses": {"200": 2, "502": 1},
        "prefill_kill_prefill_failovers": 5,
        "prefill_kill_decode_retries": 2,
    }
    assert ff.met(f)["prefill_kill_client_failed"] is False
    clean = ff.prefill_kill_figures(records[:2], inflight=3, health=health)
    assert ff.met(clean)["prefill_kill_client_failed"] is True
    assert ff.met(clean)["prefill_kill_inflight"] is True
    idle = ff.prefill_kill_figures(records[:2], inflight=0, health=health)
    assert ff.met(idle)["prefill_kill_inflight"] is False
    assert ff.met(idle)["prefill_kill_client_failed"] is False


def test_every_failure_figure_of_healthy_requests_has_a_target() -> None:
    healthy = [k for k in ff.KEYS if k.endswith("_failed") and "down" not in k]
    assert healthy and all(k in ff.TARGETS for k in healthy), set(healthy) - set(ff.TARGETS)
