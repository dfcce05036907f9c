"""A paced prefill (``DISAGG_PREFILL_PACE_TOKENS_PER_S``): the stand-in for an accelerator
pod's own pace where pods share one host's cores. A prefill for a decode holds the engine
for at least its prompt's tokens / the pace, so two of them take at least twice that; an
unpaced worker answers in its compute time. Only lower bounds are checked: a loaded host
makes things slower, never faster."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from disagg_worker.model.model import BOS
from disagg_worker.serve.server import pace_s
from tests.worker.serve.conftest import StartWorker, post

TOKENS = 200
PACE = 1000.0  # tokens/s: 0.2 s a prefill, far above the tiny model's 30 ms for 200 tokens


@pytest.mark.parametrize(
    ("tokens", "pace", "took", "expected"),
    [(200, 400.0, 0.1, 0.4), (200, 400.0, 0.7, 0.0), (200, 0.0, 0.0, 0.0), (0, 400.0, 0.0, 0.0)],
)
def test_the_pace_holds_the_engine_for_what_the_compute_left(
    tokens: int, pace: float, took: float, expected: float
) -> None:
    assert pace_s(tokens, pace, took) == pytest.approx(expected)


def _prefill(url: str, salt: int) -> float:
    body = {"prompt": [BOS] + [(salt + i) % 200 + 2 for i in range(TOKENS - 1)], "max_tokens": 1,
            "kv_transfer_params": {"do_remote_decode": True}}  # fmt: skip
    began = time.perf_counter()
    status, out = post(url + "/v1/completions", body)
    assert status == 200, out
    assert out["kv_transfer_params"]["do_remote_prefill"] is True
    return time.perf_counter() - began


def test_paced_prefills_take_the_pace_one_after_the_other(start_worker: StartWorker) -> None:
    paced = start_worker("prefill", prefill_pace_tokens_per_s=PACE)
    one = TOKENS / PACE
    assert _prefill(paced.url, 0) >= one
    began = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda salt: _prefill(paced.url, salt), (1, 2)))
    assert time.perf_counter() - began >= 2 * one  # one engine: the pace is not per request
