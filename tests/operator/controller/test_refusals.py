"""Refusals: which API answers refuse a write, the Status message, and the back-off state."""

from __future__ import annotations

import json

import pytest

from disagg_operator.controller.rules.refusals import (
    MAX_MESSAGE,
    Backoff,
    Pending,
    Refusal,
    after,
    api_message,
    held,
    is_refusal,
    lines,
)


@pytest.mark.parametrize("code", [400, 403, 413, 415, 422])
def test_client_errors_about_the_write_are_refusals(code: int) -> None:
    assert is_refusal(code)


@pytest.mark.parametrize("code", [200, 401, 404, 408, 409, 429, 500, 503, 504])
def test_transient_and_not_found_answers_are_not(code: int) -> None:
    assert not is_refusal(code)


def test_api_message_reads_a_status_body_and_cuts_long_text() -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": "Invalid",
        "message": 'Pod "p" is invalid:\n  spec.containers[0].image: Required value',
        "code": 422,
    }
    assert api_message(json.dumps(status)) == (
        "Invalid",
        'Pod "p" is invalid: spec.containers[0].image: Required value',
    )
    reason, message = api_message("x" * 5000)  # not JSON: the raw text, cut
    assert reason == "" and len(message) == MAX_MESSAGE and message.endswith("…")
    assert api_message('{"kind": "Pod"}') == ("", '{"kind": "Pod"}')


def test_lines_group_writes_by_answer() -> None:
    quota = Refusal("create", "Pod", "a", 403, "Forbidden", "exceeded quota")
    assert lines([quota, Refusal("replace", "Pod", "b", 403, "Forbidden", "exceeded quota")]) == [
        "create Pod/a, replace Pod/b refused: HTTP 403 Forbidden: exceeded quota"
    ]
    bad = Refusal("patch", "Service", "s", 400, "", "denied")
    assert lines([bad, quota]) == [
        "patch Service/s refused: HTTP 400: denied",
        "create Pod/a refused: HTTP 403 Forbidden: exceeded quota",
    ]


def test_backoff_doubles_from_5_s_to_5_min() -> None:
    assert [Backoff().delay(n) for n in range(1, 10)] == [5, 10, 20, 40, 80, 160, 300, 300, 300]
    assert Backoff().delay(10_000) == 300  # no overflow however long it lasts
    assert Backoff(first=0.5, cap=2).delay(4) == 2


R = (Refusal("create", "Pod", "p", 422, "Invalid", "no"),)


def test_a_refused_attempt_starts_then_grows_the_backoff() -> None:
    first = after(None, R, generation=1, now=100.0, holding=False, backoff=Backoff())
    assert first == Pending(1, 1, 105.0, R)
    second = after(first, R, generation=1, now=106.0, holding=False, backoff=Backoff())
    assert second == Pending(1, 2, 116.0, R)


def test_writes_are_held_inside_the_backoff_for_the_same_generation_only() -> None:
    pending = Pending(1, 1, 105.0, R)
    assert held(pending, 1, 104.9) == R
    assert held(pending, 1, 105.0) == ()  # due: the next sync is an attempt
    assert held(pending, 2, 101.0) == ()  # a new spec is tried at once
    assert held(None, 1, 101.0) == ()


def test_a_holding_sync_keeps_the_timing_and_no_refusal_resets() -> None:
    pending = Pending(1, 3, 140.0, R)
    other = (Refusal("patch", "Service", "s", 400, "", "denied"),)
    kept = after(pending, R + other, generation=1, now=120.0, holding=True, backoff=Backoff())
    assert kept == Pending(1, 3, 140.0, R + other)
    assert after(pending, (), generation=1, now=120.0, holding=True, backoff=Backoff()) is None
    fresh = after(pending, R, generation=2, now=120.0, holding=False, backoff=Backoff())
    assert fresh == Pending(2, 1, 125.0, R)  # a new generation starts over
