"""The proxy sheds what a pool cannot start in time: past the work the pool gets through in
``--pool-queue-s`` (its measured rate times that), a request is refused at once with 503,
Retry-After and an error naming the pool, and counted; under the bound nothing is refused.

Real `disagg proxy` and `disagg worker serve` processes; a paced prefill (one request at a
time, 0.5 s each) is the pool that cannot keep up.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from tests.worker.serve.conftest import Workers, get, metric
from tests.worker.serve.test_cancel import prompt

PACE = 400.0  # tokens/s
TOKENS = 200  # 0.5 s of prefill each, one at a time
FLOOD = 16
SHED = 'disagg_proxy_shed_requests_total{pool="prefill"}'


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    retry_after: str | None


def ask(url: str, salt: int) -> Answer:
    body = {"prompt": prompt(TOKENS, salt), "max_tokens": 2, "ignore_eos": True}
    req = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return Answer(resp.status, json.load(resp), resp.headers.get("Retry-After"))
    except urllib.error.HTTPError as e:
        return Answer(e.code, json.load(e), e.headers.get("Retry-After"))


@dataclass
class Stack:
    prefill: str
    group: Workers
    decode: str


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    group = Workers(tmp_path_factory.mktemp("shed"))
    try:
        children = [group.spawn("prefill", prefill_pace_tokens_per_s=PACE), group.spawn("decode")]
        group.ready(*children)
        p, d = (c.url for c in children)  # type: ignore[attr-defined]
        yield Stack(p, group, d)
    finally:
        group.stop()


def flood(proxy: str) -> list[Answer]:
    for salt in range(3):  # one at a time: the proxy learns the pool's pace
        assert ask(proxy, salt).status == 200
    with ThreadPoolExecutor(FLOOD) as pool:
        return list(pool.map(lambda salt: ask(proxy, 100 + salt), range(FLOOD)))


def test_a_flood_past_the_bound_is_shed_naming_the_pool(stack: Stack) -> None:
    proxy = stack.group.proxy([stack.prefill], [stack.decode], "--timeout-s", "8",
                              "--pool-queue-s", "2")  # fmt: skip
    answers = flood(proxy)
    statuses = sorted(a.status for a in answers)
    shed = [a for a in answers if a.status == 503]
    # 2 s of a 0.5 s-per-request pool: about 4 start in time, the others are refused
    assert 6 <= len(shed) <= FLOOD - 2, statuses
    assert set(statuses) == {200, 503}, statuses
    for a in shed:
        message = a.body["error"]["message"]
        assert message.startswith(f"prefill pool ({stack.prefill})"), message
        assert "within --pool-queue-s 2 s" in message, message
        assert a.retry_after is not None and int(a.retry_after) >= 1
    assert metric(get(proxy + "/metrics"), SHED) == len(shed)
    health = get(proxy + "/health")
    assert health["pools"]["prefill"]["queue_s"] == 2


def test_under_the_default_bound_nothing_is_shed(stack: Stack) -> None:
    # the default: a third of --timeout-s (45 s → 15 s, about 30 requests of this pool)
    proxy = stack.group.proxy([stack.prefill], [stack.decode], "--timeout-s", "45")
    answers = flood(proxy)
    assert [a.status for a in answers] == [200] * FLOOD
    assert metric(get(proxy + "/metrics"), SHED) == 0
    assert get(proxy + "/health")["pools"]["prefill"]["queue_s"] == 15
