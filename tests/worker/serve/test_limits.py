"""The bounds on what a client sends and on what an error echoes: cutting text, quoting a
client's value, measuring how deep JSON nests."""

from __future__ import annotations

import json

from disagg_worker.serve.rules.limits import bounded, nested_deeper, shown


def test_bounded_keeps_short_text_and_cuts_long_text_saying_how_long() -> None:
    assert bounded("x" * 1000) == "x" * 1000
    cut = bounded("x" * 5000)
    assert len(cut) == 1000 and cut.endswith("... (5000 characters)")
    assert bounded("abcdef", 3) == "abc"  # no room to say how long


def test_shown_quotes_a_short_prefix_of_any_value() -> None:
    assert shown("gpt") == "'gpt'"
    long = shown("m" * 100_000)
    assert long.startswith("'mmm") and long.endswith("... (100000 characters)'")
    assert len(long) <= 66
    assert len(shown(list(range(100_000)))) <= 64
    assert len(shown({"k" * 1000: ["v" * 1000] * 1000})) <= 64
    assert shown(5) == "5" and shown(None) == "None"


def test_nested_deeper_measures_lists_and_objects() -> None:
    assert not nested_deeper("x", 0) and not nested_deeper({}, 1)
    assert nested_deeper({}, 0) and nested_deeper([[]], 1) and not nested_deeper([[]], 2)
    body = {"messages": [{"role": "user", "content": "x"}], "prompt": [1, 2]}
    assert not nested_deeper(body, 3) and nested_deeper(body, 2)
    deep = json.loads("[" * 500 + "]" * 500)
    assert nested_deeper(deep, 64) and not nested_deeper(deep, 500)
