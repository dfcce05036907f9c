"""`disagg bench e2e --engine vllm`: the figures computed from the measured requests (fixed
rows whose answers are worked out by hand), and the proof that each P/D request read its KV."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from disagg_tools.bench import e2e_vllm
from disagg_tools.bench.e2e_vllm import interleaved, pd_sides, prompt, table, with_mode
from disagg_tools.bench.rules.e2e_vllm_figures import case, kv_verdict

N = 16  # prompt tokens of the case
TOPS = [{1: -0.5, 2: -1.5}, {3: -0.25, 4: -2.0}]  # the judge's top logprobs of one request


def _read(external: float = N, computed: float = 0.0, **nixl: float) -> dict[str, Any]:
    sources = {"external_kv_transfer": external, "local_compute": computed}
    return {"sources": sources, "xfer_s": 0.002, "bytes": 64_000.0, "descriptors": 4.0, **nixl}


def _row(ttft: float, ttlt: float, tokens: int, ids: list[int], **extra: Any) -> dict[str, Any]:
    return {"ttft": ttft, "ttlt": ttlt, "tokens": tokens, "token_ids": ids, "tops": TOPS, **extra}


def _pd(ttft: float, ttlt: float, tokens: int, ids: list[int], hop: float | None, **kv: Any) -> Any:
    route = {"path": "pd"} if hop is None else {"path": "pd", "prefill_hop_ms": hop}
    return _row(ttft, ttlt, tokens, ids, route=route, kv=_read(**kv))


AGG = [_row(10, 410, 17, [1, 2]), _row(30, 230, 9, [3]), _row(20, 820, 17, [4])]
PD = [
    _pd(50, 450, 17, [1, 2], 20, xfer_s=0.001),
    _pd(70, 470, 17, [3], 30, xfer_s=0.003),
    _pd(60, 260, 9, [4], 40, xfer_s=0.002),
]


def test_spreads_throughput_from_tokens_received_and_the_hops() -> None:
    phases = {"decode_queue_ms": 6.25, "decode_step_ms": 9.5, "prefill_step_ms": 14.0}
    got = case(N, AGG, PD, phases, {"decode_step_ms": 12.0})
    assert got["requests"] == 3 and got["kv_read"] == 3 and got["recomputed"] == 0
    assert got["ttft_agg_ms"] == {"median": 20, "p10": 10, "p90": 30}
    assert got["ttft_disagg_ms"] == {"median": 60, "p10": 50, "p90": 70}
    assert got["overhead_ms"] == 40
    assert got["ttlt_agg_ms"]["median"] == 410 and got["ttlt_disagg_ms"]["median"] == 450
    assert got["prefill_hop_ms"] == {"median": 30, "p10": 20, "p90": 40}
    assert got["after_prefill_ms"] == {"median": 30, "p10": 20, "p90": 40}  # 30, 40, 20
    # (tokens received - 1) / (last - first token): agg 16/0.4=40, 8/0.2=40, 16/0.8=20;
    # P/D 16/0.4=40, 16/0.4=40, 8/0.2=40
    assert got["decode_tps_agg"] == {"median": 40.0, "p10": 20.0, "p90": 40.0}
    assert got["decode_tps_disagg"] == {"median": 40.0, "p10": 40.0, "p90": 40.0}
    assert got["transfer_count"] == 3 and got["transfer_failed"] == 0
    assert got["transfer_ms"] == {"median": 2.0, "p10": 1.0, "p90": 3.0}
    assert got["transfer_kb"] == 64.0 and got["transfer_descriptors"] == 4.0
    assert got["decode_kv_wait_ms"] == 6.25 and got["decode_first_step_ms"] == 9.5
    assert got["prefill_step_ms"] == 14.0 and got["agg_step_ms"] == 12.0
    assert got["tokens_match"] is True and got["logprobs_judged"] == 3
    assert got["logprobs_gap"] == 0 and got["logprobs_match"] is True


def test_a_request_is_read_only_when_all_prompt_tokens_but_the_last_came_by_transfer() -> None:
    assert kv_verdict(N, _read(external=N)) == "read"
    assert kv_verdict(N, _read(external=N - 1, computed=1)) == "read"  # vLLM recomputes the last
    assert kv_verdict(N, _read(external=N - 2, computed=2)) == "recomputed"  # a partial load
    assert kv_verdict(N, _read(external=0, computed=N)) == "recomputed"
    assert kv_verdict(N, {"sources": {}}) == "unproven"


def test_a_case_with_a_recompute_reports_it_and_no_pd_figure() -> None:
    pd = [*PD[:2], _pd(60, 260, 9, [4], 40, external=0.0, computed=N)]
    got = case(N, AGG, pd)
    assert got["recomputed"] == 1 and got["kv_read"] == 2
    for key in ("ttft_disagg_ms", "overhead_ms", "ttlt_disagg_ms", "decode_tps_disagg",
                "prefill_hop_ms", "after_prefill_ms", "decode_kv_wait_ms"):  # fmt: skip
        assert got[key] is None, key
    assert got["ttft_agg_ms"]["median"] == 20  # the aggregated side still stands
    unproven = [*PD[:2], {**PD[2], "kv": {"sources": {}}}]
    got = case(N, AGG, unproven)
    assert got["kv_unproven"] == 1 and got["ttft_disagg_ms"] is None


def test_a_missing_hop_time_is_no_figure_never_a_zero() -> None:
    got = case(N, AGG, [*PD[:2], _pd(60, 260, 9, [4], None)])
    assert got["prefill_hop_ms"] is None and got["after_prefill_ms"] is None
    assert got["ttft_disagg_ms"]["median"] == 60


def test_one_differing_answer_is_no_match() -> None:
    pd = [*PD[:2], {**PD[2], "token_ids": [5]}]
    assert case(N, AGG, pd)["tokens_match"] is False


def test_every_request_is_judged_and_the_worst_gap_counts() -> None:
    moved = {**PD[1], "tops": [{1: -0.5, 2: -1.5}, {3: -0.45, 4: -2.0}]}
    got = case(N, AGG, [PD[0], moved, PD[2]])
    assert got["tokens_match"] is True and got["logprobs_match"] is False
    assert got["logprobs_gap"] == pytest.approx(0.2)
    # a token one side ranks and the other does not: apart, whatever the shared ones say
    other = {**PD[2], "tops": [{1: -0.5, 9: -1.5}, {3: -0.25, 4: -2.0}]}
    got = case(N, AGG, [PD[0], PD[1], other])
    assert got["logprobs_gap"] is None and got["logprobs_match"] is False


def test_every_request_gets_its_own_first_block() -> None:
    firsts = {tuple(prompt(128, c, i)[:17]) for c in range(3) for i in range(11)}
    assert len(firsts) == 33
    assert all(4 <= t < 1024 for t in prompt(512, 2, 7)[1:])


def test_table_has_a_column_per_figure() -> None:
    rows = [case(N, AGG, PD), case(N, AGG, [*PD[:2], {**PD[2], "kv": {"sources": {}}}])]
    rows = [{"mode": "pull", **rows[0]}, {"mode": "push", **rows[1]}]
    lines = table(rows).splitlines()
    assert lines[0].split()[:2] == ["mode", "prompt"]
    assert lines[0].split()[-2:] == ["match", "logprobs"]
    assert lines[2].split()[-2:] == ["True", "True"]
    assert lines[2].split()[0] == "pull" and lines[3].split()[0] == "push"
    assert "60.0 [50.0-70.0]" in lines[2] and "20.0 [10.0-30.0]" in lines[2]
    assert len({len(line) for line in lines[:4]}) == 1


def test_each_side_goes_first_in_turn() -> None:
    two = [interleaved(["agg", "P/D"], i) for i in range(2)]
    assert two == [["agg", "P/D"], ["P/D", "agg"]]
    sides = ["agg", "P/D pull", "P/D push"]
    firsts = [interleaved(sides, i)[0] for i in range(3)]
    assert firsts == sides and all(sorted(interleaved(sides, i)) == sorted(sides) for i in range(3))


def test_one_mode_keeps_the_p_d_side_and_both_measure_two_pairs() -> None:
    assert pd_sides("pull") == {"P/D": "pull"} and pd_sides("push") == {"P/D": "push"}
    assert pd_sides("both") == {"P/D pull": "pull", "P/D push": "push"}


def test_the_mode_is_written_into_the_manifest(tmp_path: Any) -> None:
    out = with_mode(e2e_vllm.MANIFEST, "push", tmp_path)
    body = yaml.safe_load(out.read_text())
    assert body["spec"]["kvTransfer"]["mode"] == "push" and out.name == "vllm-cpu-push.yaml"
    assert (
        body["spec"]["prefill"] == yaml.safe_load(e2e_vllm.MANIFEST.read_text())["spec"]["prefill"]
    )


def test_a_push_requests_transfer_figures_come_from_the_prefills_page() -> None:
    """vLLM's NixlPushConnector posts the WRITEs on the prefill: its NIXL histograms grow
    there, while the decode's prompt-token sources say where the prompt came from."""
    decode = 'vllm:prompt_tokens_by_source_total{source="external_kv_transfer"} 15.0\n'
    prefill = "vllm:nixl_xfer_time_seconds_sum 0.004\nvllm:nixl_xfer_time_seconds_count 1\n"
    got = e2e_vllm._counted(decode, prefill)
    assert got["sources"].get("external_kv_transfer") == 15.0
    assert got["xfer_s"] == 0.004
